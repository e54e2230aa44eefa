"""The fleet end to end, with real parts: two simulated clusters, each a Watchtower demo service on its own
simulator, each scraped by its own real Prometheus with `external_labels: {cluster: a|b}` and the fleet-mode
rules, both remote-writing to a real global engine; every panel of every fleet-mode dashboard and every
fleet recording rule read back through the engine's Prometheus-compatible query API.

The engine is VictoriaMetrics (single node), not Thanos: it is a Debian package (`victoria-metrics`, installed by
tests/setup/system-deps.sh beside prometheus), so a cold `.ci/run` needs no Go build, while Thanos' Go module is
large (hundreds of dependencies, minutes of a link on this 2-core machine) for no more than what this test
asks of an engine: take remote writes from several Prometheus and answer PromQL over all of them.

Both demos run in one event loop on a thread of their own (as `SimExporter` does), so that the tests, which
wait on the engine with blocking HTTP calls, never stall them. Each cluster's exporter is served a second time
from that loop (`SimulatedCluster.serve_metrics`): `DemoRun` hands out the service's URL, not the address of
the exporter the demo started, and one more reader of the same simulator changes nothing it reports. Each
cluster is also given one running Job whose GPU idles, for the idle panels and rules: the demo's warm start
may hold none.

What the engine answers differently from Prometheus, and the test allows for: it prints 12 significant digits
(Prometheus 15); MetricsQL drops NaN samples, answering with a series' last number instead; and it shows a
series that ended (a GPU's series changes with the pod on it) for a while after Prometheus stops showing it.

Size: one module-scoped fixture of five real parts (two demos, two Prometheus, the engine) and the checks that
share it; split in two files, each would start them all again (a minute of this machine each).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import shutil
import subprocess
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import generate as alerts_generate
from tests.prometheus.prom_server import HTTPServer, PrometheusProcess, free_port, metrics_route
from watchtower.adapters.prometheus.process import scrape_config
from watchtower.commands import generate as artefacts
from watchtower.commands.demo.run import DemoOptions, DemoRun, run_demo
from watchtower.config import Settings, settings_from_mapping
from watchtower.simulator.workloads import Pattern, single_pod

ENGINE = "victoria-metrics"
CLUSTERS = {"a": 3, "b": 5}  # cluster -> simulated nodes: two clusters that differ, so a mix would show
# Grafana's variables, as the dashboards' defaults would set them ($cluster is set per cluster below);
# `$__range_s` before `$__range`, which is a prefix of it.
VARIABLES = {
    "$namespace": ".*",
    "$team": ".*",
    "$__rate_interval": "1m",
    "$__range_s": "3600",
    "$__range": "1h",
}
# Panels with no series in a simulated run of a minute, each with the reason; their queries must still run.
NO_DATA_IN_A_SIMULATED_RUN = {
    "Other disruptions per hour by reason and tier": "the simulator disrupts a pod only by preemption "
    "(PreemptionByScheduler), which the churn panels count; no eviction, taint or drain",
    "MIG slices by profile: reported and in use by running pods": "the simulator's GPUs are whole GPUs: "
    "its DCGM exporter writes no GPU_I_PROFILE label (no MIG slice)",
    "MIG slice utilisation per team": "no MIG slice in the simulator, as above",
}
# Recording rules likewise: the ones the MIG panels read.
RULES_WITHOUT_DATA_IN_A_SIMULATED_RUN = {
    "team:watchtower_idle_mig_slices:count": "no MIG slice in the simulator (no GPU_I_PROFILE label)",
    "profile:watchtower_mig_slices:count": "no MIG slice in the simulator",
    "profile:watchtower_mig_slices_in_use:count": "no MIG slice in the simulator",
}
# A series that already has a `cluster` label when its Prometheus adds its external label.
COLLIDING_SERIES = 'fleet_test_collision{cluster="elsewhere"} 1\n'
DATA_DEADLINE = 120.0  # seconds from the first query: scrapes, rule evaluations, remote writes, rate windows;
# `make test` runs this beside the niced Go builds, which keep both cores busy


def _fleet_settings() -> Settings:
    return settings_from_mapping({"artefacts": {"fleet": True}}, env={})


@pytest.fixture(scope="session")
def real_engine() -> None:
    """Fails (not skips) when the engine is missing, as `real_prometheus` does."""
    if shutil.which(ENGINE) is None:
        pytest.fail(f"{ENGINE} not on PATH: run tests/setup/system-deps.sh")


class Engine:
    """VictoriaMetrics single node on 127.0.0.1, its storage in the test's directory; stopped by its pid."""

    def __init__(self, workdir: Path) -> None:
        self.port = free_port()
        self.log_path = workdir / "victoria-metrics.log"
        self.data = workdir / "victoria-metrics-data"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> Engine:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    ENGINE,
                    f"-httpListenAddr=127.0.0.1:{self.port}",
                    f"-storageDataPath={self.data}",
                    "-retentionPeriod=1d",
                    # By default a sample is hidden from queries for its first 30 s (late writers); here the
                    # writers are two Prometheus a second away, and the test reads what they just wrote.
                    "-search.latencyOffset=1s",
                    # A cached answer would hide the samples written since: every query reads the storage.
                    "-search.disableCache",
                    "-loggerLevel=WARN",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{ENGINE} exited: {self.log_path.read_text()[-2000:]}")
            with contextlib.suppress(OSError), urllib.request.urlopen(f"{self.url}/health", timeout=2) as r:
                if r.status == 200:
                    return self
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"{ENGINE} not ready in {timeout}s: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()  # SIGTERM to this pid only
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


class Demos:
    """One demo service per cluster, all in one event loop on a thread of their own."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.tasks: list[asyncio.Task[None]] = []
        self.exporters: list[Any] = []

    def start(self, name: str, nodes: int, seed: int) -> tuple[DemoRun, int]:
        """Start a demo of `nodes` simulated nodes; return it and the port of its simulator's exporter."""
        if not self.thread.is_alive():
            self.thread.start()
        base = Settings()
        base = base.model_copy(
            update={"simulator": base.simulator.model_copy(update={"nodes": nodes, "seed": seed})}
        )
        ready: threading.Event = threading.Event()
        got: list[DemoRun] = []

        def on_ready(run: DemoRun) -> None:
            got.append(run)
            ready.set()

        opts = DemoOptions(prometheus=False, past_week=False, seed=seed)

        async def spawn() -> asyncio.Task[None]:
            return asyncio.create_task(run_demo(opts, echo=lambda _: None, on_ready=on_ready, base=base))

        task = asyncio.run_coroutine_threadsafe(spawn(), self.loop).result(30)
        self.tasks.append(task)
        deadline = time.monotonic() + 120
        while not ready.wait(0.2):
            if task.done():
                task.result()  # raises what stopped it
            assert time.monotonic() < deadline, f"demo {name} did not start within 120 s"
        run = got[0]
        # The idle panels and rules need a running pod whose GPU idles; the warm start may hold none.
        idle = single_pod(
            kind="Job",
            name="fleet-idle",
            team="vision",
            priority_class="online-serving",
            gpus=1,
            duration=1e7,
            pattern=Pattern.IDLE,
        )

        async def submit() -> None:
            run.sim.submit(idle)

        asyncio.run_coroutine_threadsafe(submit(), self.loop).result(30)
        exporter = asyncio.run_coroutine_threadsafe(run.sim.serve_metrics("127.0.0.1", 0), self.loop).result(
            30
        )
        self.exporters.append(exporter)
        return run, int(exporter.port)

    def stop(self) -> None:
        async def stop_all() -> None:
            for exporter in self.exporters:
                await exporter.close()
            for task in self.tasks:
                task.cancel()
            # Each demo stops what it started (service, sinks, exporter) before its task ends.
            await asyncio.gather(*self.tasks, return_exceptions=True)

        if self.thread.is_alive():
            asyncio.run_coroutine_threadsafe(stop_all(), self.loop).result(90)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()


def prometheus_config(
    *, cluster: str, exporter: int, watchtower: int, rules: Path, engine: str, collision: int
) -> str:
    """The demo's own scrape configuration (the simulator's exporter and Watchtower) with this cluster's
    external label, the fleet rules and a remote write to the engine, flushed every second; and a target at
    `collision` whose series already carries a `cluster` label, scraped with `honor_labels` as the exporter
    jobs are (docs/fleet.md's pitfall)."""
    doc = yaml.safe_load(
        scrape_config(
            exporter=f"127.0.0.1:{exporter}", watchtower=f"127.0.0.1:{watchtower}", scrape_interval=1
        )
    )
    doc["scrape_configs"].append(
        {
            "job_name": "collision",
            "honor_labels": True,
            "static_configs": [{"targets": [f"127.0.0.1:{collision}"]}],
        }
    )
    doc["global"]["external_labels"] = {"cluster": cluster}
    doc["rule_files"] = [str(rules)]
    doc["remote_write"] = [
        {
            "url": f"{engine}/api/v1/write",
            "queue_config": {"batch_send_deadline": "1s", "min_backoff": "100ms", "max_backoff": "1s"},
        }
    ]
    return yaml.safe_dump(doc, sort_keys=False)


@dataclass
class Fleet:
    engine: Engine
    prometheus: dict[str, PrometheusProcess]
    groups: list[dict[str, Any]]  # the fleet rule groups each Prometheus evaluates
    boards: dict[str, dict[str, Any]]  # dashboard title -> the fleet-mode dashboard


@pytest.fixture(scope="module")
def fleet(
    tmp_path_factory: pytest.TempPathFactory, real_prometheus: None, real_engine: None
) -> Iterator[Fleet]:
    tmp = tmp_path_factory.mktemp("fleet")
    files = artefacts.render(_fleet_settings())
    rules_text = files[Path("alerts") / alerts_generate.RULES]
    rules_path = tmp / "fleet-rules.yaml"
    rules_path.write_text(rules_text)
    groups = yaml.safe_load(rules_text)["groups"]
    boards = {}
    for rel, text in files.items():
        if rel.parts[0] == "dashboards":
            board = json.loads(text)
            boards[board["title"]] = board
    with contextlib.ExitStack() as stack:
        engine = Engine(tmp).start()
        stack.callback(engine.stop)
        demos = Demos()
        stack.callback(demos.stop)
        collision = HTTPServer({"/metrics": metrics_route(lambda: COLLIDING_SERIES)}).start()
        stack.callback(collision.stop)
        proms = {}
        for seed, (cluster, nodes) in enumerate(CLUSTERS.items(), start=11):
            run, exporter = demos.start(cluster, nodes, seed)
            config = prometheus_config(
                cluster=cluster,
                exporter=exporter,
                watchtower=int(run.url.rsplit(":", 1)[1]),
                rules=rules_path,
                engine=engine.url,
                collision=collision.port,
            )
            prom = PrometheusProcess(config=config, data_dir=tmp / f"prometheus-{cluster}")
            prom.start()
            stack.callback(prom.stop)
            proms[cluster] = prom
        yield Fleet(engine, proms, groups, boards)


def _query(url: str, expr: str, at: float | None = None) -> dict[str, Any]:
    params = {"query": expr} | ({"time": f"{at:.3f}"} if at is not None else {})
    try:
        with urllib.request.urlopen(f"{url}/api/v1/query?" + urllib.parse.urlencode(params), timeout=30) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


def _series(url: str, expr: str, at: float | None = None) -> list[dict[str, Any]]:
    got = _query(url, expr, at)
    assert got["status"] == "success", f"{expr}: {got.get('error')}"
    return got["data"]["result"]


_started: list[float] = []


def _until_series(
    url: str, expr: str, enough: Callable[[list[dict[str, Any]]], bool] = bool
) -> list[dict[str, Any]]:
    """The series `expr` returns, polling until they are `enough` (some, by default) or the run's shared
    deadline passes: the first caller waits for the scrapes, rules and windows to fill, the others find them
    filled."""
    if not _started:
        _started.append(time.monotonic())
    while True:
        got = _series(url, expr)
        if enough(got) or time.monotonic() > _started[0] + DATA_DEADLINE:
            return got
        time.sleep(1)


def _panel_queries() -> list[tuple[str, str, str]]:
    files = artefacts.render(_fleet_settings())
    out = []
    for rel, text in sorted(files.items()):
        if rel.parts[0] != "dashboards":
            continue
        board = json.loads(text)
        for p in board["panels"]:
            for q in [p, *p.get("panels", [])]:
                for t in q.get("targets", []):
                    expr = t["expr"]
                    for k, v in VARIABLES.items():
                        expr = expr.replace(k, v)
                    out.append((board["title"], q["title"], expr))
    return out


PANELS = _panel_queries()


def test_the_allow_lists_name_only_panels_and_rules_that_exist() -> None:
    assert set(NO_DATA_IN_A_SIMULATED_RUN) <= {p for _, p, _ in PANELS}
    groups = yaml.safe_load(artefacts.render(_fleet_settings())[Path("alerts") / alerts_generate.RULES])
    records = {r.get("record") for g in groups["groups"] for r in g["rules"]}
    assert set(RULES_WITHOUT_DATA_IN_A_SIMULATED_RUN) <= records


def test_grafanas_cluster_variable_lists_both_clusters(fleet: Fleet) -> None:
    board = next(iter(fleet.boards.values()))
    variable = board["templating"]["list"][1]
    metric = re.fullmatch(r"label_values\((\w+), cluster\)", variable["query"])
    assert metric, variable["query"]
    got = _until_series(
        fleet.engine.url, metric.group(1), lambda got: {s["metric"]["cluster"] for s in got} >= set(CLUSTERS)
    )
    assert {s["metric"]["cluster"] for s in got} == set(CLUSTERS)
    with urllib.request.urlopen(
        f"{fleet.engine.url}/api/v1/label/cluster/values?"
        + urllib.parse.urlencode({"match[]": metric.group(1)}),
        timeout=30,
    ) as r:
        assert json.loads(r.read())["data"] == sorted(CLUSTERS)


@pytest.mark.parametrize(
    ("board", "panel", "expr"), PANELS, ids=[f"{b.split()[-1]}: {p[:50]}" for b, p, _ in PANELS]
)
@pytest.mark.parametrize("cluster", list(CLUSTERS))
def test_every_fleet_panel_returns_each_clusters_own_series_through_the_engine(
    fleet: Fleet, board: str, panel: str, expr: str, cluster: str
) -> None:
    query = expr.replace("$cluster", cluster)
    if panel in NO_DATA_IN_A_SIMULATED_RUN:
        _series(fleet.engine.url, query)  # runs, whatever it returns
        return
    got = _until_series(fleet.engine.url, query)
    assert got, f"{board} / {panel}: no series for cluster {cluster}: {query}"
    assert {s["metric"].get("cluster") for s in got} == {cluster}, (panel, query)


def test_every_fleet_recording_rule_reaches_the_engine_under_its_own_clusters_label(fleet: Fleet) -> None:
    """Each Prometheus evaluates the fleet rules over its own cluster (no `cluster` label there: it is an
    external label) and ships the results; in the engine each result series is its Prometheus' series plus
    that Prometheus' cluster label, with the same value at the same instant: no series carries both clusters'
    figures or lands under the other's label."""
    records = [r["record"] for g in fleet.groups for r in g["rules"] if "record" in r]
    assert len(records) > 20
    # The fairness usage group runs every fairness.step (5 minutes) at an offset Prometheus picks: it may not
    # have run yet in a run this short; every other rule runs every second.
    slow = {r["record"] for g in fleet.groups if g.get("interval") for r in g["rules"] if "record" in r}
    missing = []
    for record in records:
        for cluster, prom in fleet.prometheus.items():
            expected = record not in slow and record not in RULES_WITHOUT_DATA_IN_A_SIMULATED_RUN
            selector = f'{record}{{cluster="{cluster}"}}'
            engine_series = (_until_series if expected else _series)(fleet.engine.url, selector)
            if not engine_series:
                if expected:
                    missing.append((record, cluster))
                continue
            at = float(engine_series[0]["value"][0]) - 3  # samples both sides have had time to exchange
            local = {
                _labels(s["metric"]): float(s["value"][1])
                for s in _series(prom.url, record, at)
                if math.isfinite(float(s["value"][1]))
            }
            remote = {
                _labels(s["metric"], drop=("cluster",)): float(s["value"][1])
                for s in _series(fleet.engine.url, f'{record}{{cluster="{cluster}"}}', at)
            }
            # MetricsQL drops NaN samples and answers with the series' last number instead (a quantile of an
            # empty window, an attainment of nothing entitled): only the finite figures can be compared, and
            # the engine's other series must be series this Prometheus wrote in the last five minutes. The
            # engine prints 12 significant digits where Prometheus prints 15: the same float otherwise.
            assert {k: remote.get(k) for k in local} == pytest.approx(local, rel=1e-11), (record, cluster)
            assert set(remote) <= _series_since(prom.url, record, at - 300, at), (record, cluster)
    assert missing == [], missing


def _series_since(url: str, match: str, start: float, end: float) -> set[tuple[tuple[str, str], ...]]:
    params = urllib.parse.urlencode({"match[]": match, "start": f"{start:.3f}", "end": f"{end:.3f}"})
    with urllib.request.urlopen(f"{url}/api/v1/series?{params}", timeout=30) as r:
        return {_labels(m) for m in json.loads(r.read())["data"]}


def _labels(metric: dict[str, str], drop: tuple[str, ...] = ()) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in metric.items() if k not in drop))


def test_the_two_clusters_figures_stay_apart(fleet: Fleet) -> None:
    """The clusters differ (3 and 5 nodes, and the demo's 2 DRA nodes each): the engine's GPUs per cluster
    are each Prometheus' own. Counted by GPU (host and index), not by series: a GPU's series changes with the
    pod on it, and the engine shows a series that ended for a while after Prometheus stops showing it."""
    per_gpu = "count by (cluster) (count by (cluster, Hostname, gpu) (DCGM_FI_DEV_GPU_UTIL))"
    got = _until_series(fleet.engine.url, per_gpu, lambda got: len(got) == 2)
    at = float(got[0]["value"][0]) - 3
    per = {s["metric"]["cluster"]: float(s["value"][1]) for s in _series(fleet.engine.url, per_gpu, at)}
    local = {c: float(_series(p.url, per_gpu, at)[0]["value"][1]) for c, p in fleet.prometheus.items()}
    assert per == local == {"a": (3 + 2) * 8, "b": (5 + 2) * 8}


def test_an_external_label_does_not_overwrite_a_cluster_label_already_on_the_data(fleet: Fleet) -> None:
    """docs/fleet.md's pitfall, shown: both Prometheus scrape one target whose series is labelled
    `cluster="elsewhere"` (honor_labels, as the exporter jobs). The series' own value wins over each external
    label (Prometheus' storage/remote/queue_manager.go, processExternalLabels), so the engine holds one series
    `elsewhere` where there were two clusters' series, their samples mixed."""
    for prom in fleet.prometheus.values():
        assert len(_until_series(prom.url, "fleet_test_collision")) == 1
    got = _until_series(fleet.engine.url, "fleet_test_collision")
    assert [s["metric"]["cluster"] for s in got] == ["elsewhere"]
