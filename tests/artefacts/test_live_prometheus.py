"""Every dashboard query and every generated rule against the REAL Prometheus, scraping the simulator's
exporter (DCGM and kube-state-metrics shaped) and a QueueTracker's /metrics fed by the same simulator, with the
generated rule file loaded. The simulator keeps running (30 simulated seconds a second) while Prometheus
scrapes, so rates and histogram quantiles see new preemptions, bindings and starts.

The simulator never evicts a pod other than by preemption, so one drain eviction (a running pod's
DisruptionTarget `EvictionByEvictionAPI`, as the eviction API writes it) is fed to the QueueTracker through its
decoder: the "other disruptions" panel then has a real series to read."""

from __future__ import annotations

import json
import math
import threading
import time
import urllib.parse
import urllib.request
from pathlib import Path

import msgspec
import pytest
import yaml
from prometheus_client import CollectorRegistry

from alerts import alerting, recording
from alerts import generate as alerts_generate
from tests.prometheus.prom_server import CONTENT_TYPE as TEXT_FORMAT
from tests.prometheus.prom_server import HTTPServer, PrometheusProcess
from watchtower.adapters.metrics.registry import CONTENT_TYPE, WatchtowerMetrics
from watchtower.bootstrap import object_decoder
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.services.queue_tracker import QueueTracker
from watchtower.simulator.cluster import KINDS, SimulatedCluster

pytestmark = pytest.mark.prometheus
ROOT = Path(__file__).parents[2]
# `$__range_s` before `$__range`, which is a prefix of it.
VARIABLES = {
    "$namespace": ".*",
    "$team": ".*",
    "$__rate_interval": "1m",
    "$__range_s": "3600",
    "$__range": "1h",
}


class SimClock:
    def __init__(self, sim: SimulatedCluster) -> None:
        self.sim = sim

    def now(self) -> float:
        return self.sim.now()


def _get(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=30) as r:
        return json.loads(r.read())


def _query(prom: PrometheusProcess, expr: str) -> dict:
    try:
        return _get(f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": expr}))
    except urllib.error.HTTPError as e:
        return json.loads(e.read())


def _panel_queries() -> list[tuple[str, str, str]]:
    out = []
    for path in sorted((ROOT / "dashboards" / "generated").glob("*.json")):
        board = json.loads(path.read_text())
        for p in board["panels"]:
            for t in p.get("targets", []):
                expr = t["expr"]
                for k, v in VARIABLES.items():
                    expr = expr.replace(k, v)
                out.append((board["title"], p["title"], expr))
    return out


@pytest.fixture(scope="module")
def prom(tmp_path_factory, real_prometheus_bin):
    tmp = tmp_path_factory.mktemp("artefacts-prom")
    sim = demo_cluster(SimulatorConfig(seed=5, nodes=4))
    settings = Settings()
    metrics = WatchtowerMetrics(
        registry=CollectorRegistry(), tier_bounds=[t.warn_after for t in settings.tier_policy().tiers]
    )
    tracker = QueueTracker(
        settings=settings,
        clock=SimClock(sim),
        metrics=metrics,
        decoder=object_decoder(settings),
        source_health=sim.feed_health,
    )
    for kind in KINDS:
        tracker.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
    lock = threading.Lock()

    def step(seconds: float) -> None:
        with lock:
            sim.step(seconds)
            for kind, type_, raw in sim.drain():
                tracker.on_change(kind, type_, raw)
            tracker.evaluate(sim.now())

    for _ in range(20):  # 20 simulated minutes: arrivals, scheduling, waits, preemptions
        step(60)
    _evict_one_running_pod(sim, tracker)
    stop = threading.Event()

    def keep_running() -> None:
        while not stop.wait(1.0):
            step(30)

    def sim_metrics(which: str):
        def route() -> tuple[int, str, bytes]:
            with lock:
                return 200, TEXT_FORMAT, sim.render_metrics(which=which).encode()

        return route

    exporter = HTTPServer(
        {
            "/metrics/dcgm": sim_metrics("dcgm"),
            "/metrics/kube-state-metrics": sim_metrics("kube-state-metrics"),
        }
    ).start()
    own = HTTPServer({"/metrics": lambda: (200, CONTENT_TYPE, metrics.render())}).start()
    runner = threading.Thread(target=keep_running, daemon=True)
    runner.start()
    rules = tmp / "rules.yaml"
    rules.write_text((ROOT / "alerts" / alerts_generate.RULES).read_text())
    config = f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: ['{rules}']
scrape_configs:
  - job_name: dcgm-exporter
    metrics_path: /metrics/dcgm
    honor_labels: true
    static_configs: [{{targets: ['127.0.0.1:{exporter.port}']}}]
  - job_name: kube-state-metrics
    metrics_path: /metrics/kube-state-metrics
    honor_labels: true
    static_configs: [{{targets: ['127.0.0.1:{exporter.port}']}}]
  - job_name: watchtower
    static_configs: [{{targets: ['127.0.0.1:{own.port}']}}]
"""
    server = PrometheusProcess(config=config, data_dir=tmp / "data")
    server.start()
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # a few scrapes and a few rule evaluations
            got = _query(server, recording.TEAM_ALLOCATED)
            up = _query(server, "count(up == 1)")["data"]["result"]
            if got["data"]["result"] and up and up[0]["value"][1] == "3":
                break
            time.sleep(0.5)
        time.sleep(3)
        yield server
    finally:
        stop.set()
        runner.join(30)
        server.stop()
        own.stop()
        exporter.stop()


def _evict_one_running_pod(sim: SimulatedCluster, tracker: QueueTracker) -> None:
    for raw in sim.list_objects("Pod"):
        pod = json.loads(raw)
        if pod["status"].get("phase") == "Running":
            pod["status"]["conditions"].append(
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "EvictionByEvictionAPI",
                    "message": "Eviction API: evicting",
                    "lastTransitionTime": pod["status"]["startTime"],
                }
            )
            tracker.on_change("Pod", "MODIFIED", json.dumps(pod).encode())
            return
    raise AssertionError("the simulator has no running pod to evict")


@pytest.fixture(scope="module")
def real_prometheus_bin():
    from tests.prometheus.prom_server import have_prometheus

    if not have_prometheus():
        pytest.fail("prometheus/promtool not on PATH: run tests/setup/system-deps.sh")


@pytest.mark.parametrize(
    ("board", "panel", "expr"), _panel_queries(), ids=lambda v: v if len(v) < 60 else None
)
def test_every_panel_query_runs_without_error(prom, board: str, panel: str, expr: str) -> None:
    got = _query(prom, expr)
    assert got["status"] == "success", f"{board} / {panel}: {got.get('error')}"


@pytest.mark.parametrize(
    "expr",
    [
        'sum by (tier) (watchtower_pending_workloads{namespace=~".*"})',
        'max(watchtower_oldest_wait_seconds{tier="low"})',
        next(e for b, p, e in _panel_queries() if p == "GPUs allocated per team"),
        next(e for b, p, e in _panel_queries() if p == "GPU utilisation per team"),
    ],
    ids=["pending per tier", "oldest wait", "GPUs allocated per team", "utilisation per team"],
)
def test_key_panels_return_data(prom, expr: str) -> None:
    got = _query(prom, expr)
    assert got["status"] == "success" and got["data"]["result"], expr


def test_every_generated_rule_evaluates_without_error(prom) -> None:
    groups = _get(f"{prom.url}/api/v1/rules")["data"]["groups"]
    rules = [r for g in groups for r in g["rules"]]
    # Every rule of the file Prometheus was given is loaded (none dropped by a parse it did not report).
    shipped = yaml.safe_load((ROOT / "alerts" / alerts_generate.RULES).read_text())["groups"]
    assert len(rules) == sum(len(g["rules"]) for g in shipped) >= 39
    bad = []
    for g in groups:
        for r in g["rules"]:
            if r["health"] == "ok":
                continue
            if r["health"] == "unknown" and g["interval"] > 60:
                # Not evaluated yet: its group runs every fairness.step (5 min), at an offset Prometheus picks.
                # Its expression, evaluated now, must run as well.
                got = _query(prom, r["query"])
                if got["status"] == "success":
                    continue
                bad.append((r["name"], got.get("error")))
            else:
                bad.append((r["name"], r.get("lastError")))
    assert bad == []


@pytest.mark.parametrize(
    "record",
    [
        recording.PENDING_BY_TIER,
        recording.OLDEST_WAIT_BY_TIER,
        recording.TEAM_ALLOCATED,
        recording.NAMESPACE_TEAM,
        recording.CLUSTER_UTILISATION,
        recording.JAIN_INDEX,
        recording.TEAM_ATTAINMENT,
        recording.TEAM_IDLE_SHARE,
        recording.CLUSTER_IDLE_SHARE,
    ],
)
def test_recording_rules_produce_series(prom, record: str) -> None:
    got = _query(prom, record)
    assert got["data"]["result"], record


def _finite(result: list[dict]) -> list[float]:
    return [float(r["value"][1]) for r in result if math.isfinite(float(r["value"][1]))]


def _returns_data(prom, expr: str, timeout: float = 90.0) -> list[float]:
    """Return the finite values of `expr`, polling while the running simulator fills the windows."""
    deadline = time.monotonic() + timeout
    while True:
        got = _query(prom, expr)
        assert got["status"] == "success", got.get("error")
        values = _finite(got["data"]["result"])
        if values or time.monotonic() > deadline:
            return values
        time.sleep(2)


CHURN = [(b, p, e) for b, p, e in _panel_queries() if b == "Watchtower — Preemption churn"]


@pytest.mark.parametrize(("board", "panel", "expr"), CHURN, ids=[f"{p} {e[:30]}" for _, p, e in CHURN])
def test_every_churn_panel_returns_data(prom, board: str, panel: str, expr: str) -> None:
    assert _returns_data(prom, expr), f"{panel}: no finite value for {expr}"


def test_the_churn_matrices_count_real_preemptions_and_other_disruptions_apart(prom) -> None:
    tiers = _query(prom, "sum by (victim_tier, preemptor_tier) (watchtower_preemptions_total)")
    assert sum(float(r["value"][1]) for r in tiers["data"]["result"]) > 0
    teams = _query(prom, "sum(watchtower_team_preemptions_total)")["data"]["result"]
    assert teams and float(teams[0]["value"][1]) == sum(float(r["value"][1]) for r in tiers["data"]["result"])
    other = _query(prom, "watchtower_disruptions_total")["data"]["result"]
    assert [r["metric"]["reason"] for r in other] == ["EvictionByEvictionAPI"]


FAIRNESS = [(b, p, e) for b, p, e in _panel_queries() if b == "Watchtower — Fairness"]


@pytest.mark.parametrize(("board", "panel", "expr"), FAIRNESS, ids=[f"{p} {e[:30]}" for _, p, e in FAIRNESS])
def test_every_fairness_panel_returns_data(prom, board: str, panel: str, expr: str) -> None:
    assert _returns_data(prom, expr), f"{panel}: no finite value for {expr}"


def test_jains_index_rule_on_the_live_prometheus_is_jains_index_of_the_exported_satisfactions(prom) -> None:
    assert _returns_data(prom, recording.JAIN_INDEX)
    rules = _get(f"{prom.url}/api/v1/rules")["data"]["groups"]
    (expr,) = [r["query"] for g in rules for r in g["rules"] if r["name"] == recording.JAIN_INDEX]
    at = f"{time.time() - 2:.3f}"  # one instant for both, so the running simulator cannot move between them

    def values(e: str) -> list[float]:
        url = f"{prom.url}/api/v1/query?" + urllib.parse.urlencode({"query": e, "time": at})
        return [float(r["value"][1]) for r in _get(url)["data"]["result"]]

    xs = values("max by (team) (watchtower_team_satisfaction)")
    (got,) = values(expr)
    assert len(xs) >= 2
    assert got == pytest.approx(sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)), rel=1e-12)


@pytest.mark.parametrize("record", [recording.SCHEDULE_P50, recording.SCHEDULE_P95])
def test_the_queue_dashboards_time_to_schedule_percentiles_come_from_the_shipped_rules(
    prom, record: str
) -> None:
    queue = json.loads((ROOT / "dashboards" / "generated" / "watchtower-queue.json").read_text())
    panel = next(p for p in queue["panels"] if p["title"] == "Time to schedule per tier: p50 and p95")
    assert record in [t["expr"] for t in panel["targets"]]
    assert _returns_data(prom, record), record


def test_the_thrash_rule_reads_the_series_the_churn_dashboard_shows(prom) -> None:
    groups = _get(f"{prom.url}/api/v1/rules")["data"]["groups"]
    thrash = [r for g in groups for r in g["rules"] if r["name"] == alerting.PREEMPTION_THRASH]
    assert len(thrash) == 1 and thrash[0]["health"] == "ok"
    assert _query(prom, "max by (tier) (watchtower_workload_preemptions_max)")["data"]["result"]
