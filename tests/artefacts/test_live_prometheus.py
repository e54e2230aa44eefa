"""Every dashboard query and every generated rule against the REAL Prometheus, scraping the simulator's
exporter (DCGM and kube-state-metrics shaped) and a Watcher's /metrics fed by the same simulator, with the
generated rule file loaded."""

from __future__ import annotations

import json
import time
import urllib.parse
import urllib.request
from pathlib import Path

import msgspec
import pytest
from prom_server import HTTPServer, PrometheusProcess, SimExporter
from prometheus_client import CollectorRegistry

from alerts import generate as alerts_generate
from alerts import recording
from watchtower.adapters.metrics import CONTENT_TYPE, WatchtowerMetrics
from watchtower.adapters.sim.cluster import KINDS, SimulatedCluster
from watchtower.bootstrap import object_decoder
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.services.watch import Watcher

pytestmark = pytest.mark.prometheus
ROOT = Path(__file__).parents[2]
VARIABLES = {"$namespace": ".*", "$team": ".*", "$__rate_interval": "1m"}


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
    sim = SimulatedCluster(SimulatorConfig(seed=5, nodes=4))
    settings = Settings()
    metrics = WatchtowerMetrics(
        registry=CollectorRegistry(), tier_bounds=[t.warn_after for t in settings.tier_policy().tiers]
    )
    watcher = Watcher(
        settings=settings,
        clock=SimClock(sim),
        metrics=metrics,
        decoder=object_decoder(settings),
        source_health=sim.feed_health,
    )
    for kind in KINDS:
        watcher.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
    for _ in range(20):  # 20 simulated minutes: arrivals, scheduling, waits, preemptions
        sim.step(60)
        for kind, type_, raw in sim.drain():
            watcher.on_change(kind, type_, raw)
        watcher.evaluate(sim.now())
    exporter = SimExporter(sim).start()
    own = HTTPServer({"/metrics": lambda: (200, CONTENT_TYPE, metrics.render())}).start()
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
        server.stop()
        own.stop()
        exporter.stop()


@pytest.fixture(scope="module")
def real_prometheus_bin():
    from prom_server import have_prometheus

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
    assert len(rules) == 34
    bad = [(r["name"], r.get("lastError")) for r in rules if r["health"] != "ok"]
    assert bad == []


@pytest.mark.parametrize(
    "record",
    [
        recording.PENDING_BY_TIER,
        recording.OLDEST_WAIT_BY_TIER,
        recording.TEAM_ALLOCATED,
        recording.NAMESPACE_TEAM,
        recording.CLUSTER_UTILISATION,
    ],
)
def test_recording_rules_produce_series(prom, record: str) -> None:
    got = _query(prom, record)
    assert got["data"]["result"], record
