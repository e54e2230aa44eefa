"""Prometheus stopped mid-run, slow, refusing or rejecting: the service keeps going and says so."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests.prometheus.prom_exposition import Device, KsmPod, dcgm_text, ksm_text
from tests.prometheus.prom_server import CONTENT_TYPE, HTTPServer, PrometheusProcess, free_port, metrics_route
from tests.prometheus.prom_snapshots import snapshot_holding_and_waiting, snapshot_waiting
from watchtower.adapters.prometheus.reader import (
    PrometheusQueryError,
    PrometheusReader,
    PrometheusTimeout,
    PrometheusUnavailable,
)
from watchtower.config.model import Settings
from watchtower.domain.gpu_usage import IDLE_ALERT, UNREACHABLE_ALERT, IdlePolicy
from watchtower.domain.promql.exporters import ExporterQueries, QueryConfig
from watchtower.services.gpu_usage import GpuUsageService

SCRAPE = 1.0
WINDOW = 4.0


def _service(reader: PrometheusReader) -> GpuUsageService:
    return GpuUsageService(
        reader=reader,
        queries=ExporterQueries(),
        policy=IdlePolicy(threshold=10.0, window=WINDOW, slack=SCRAPE),
        tiers=Settings().tier_policy(),
        step=SCRAPE,
        every=0.0,
        # The snapshots of these tests are evaluated with running workloads included.
        holders_included=True,
    )


@pytest.fixture
def exporter() -> Iterator[HTTPServer]:
    devices = [Device(0, "n1", pod="idle-0", namespace="ml", util=1.0)]
    pods = [KsmPod("ml", "idle-0", 1, owner_name="idle-job")]
    server = HTTPServer(
        {
            "/dcgm": metrics_route(lambda: dcgm_text(devices)),
            "/ksm": metrics_route(lambda: ksm_text(pods, {"ml": None})),
        }
    ).start()
    yield server
    server.stop()


def _config(target: str) -> str:
    host = target.removeprefix("http://")
    return (
        f"global:\n  scrape_interval: {SCRAPE:g}s\nscrape_configs:\n"
        f"  - job_name: kube-state-metrics\n    honor_labels: true\n    metrics_path: /ksm\n"
        f"    static_configs: [{{targets: ['{host}']}}]\n"
        f"  - job_name: dcgm\n    metrics_path: /dcgm\n    static_configs: [{{targets: ['{host}']}}]\n"
    )


def _wait_until_idle(svc: GpuUsageService, snap_for) -> None:
    while True:  # bounded by pytest's own timeout; no figure depends on how long this takes
        now = time.time()
        asyncio.run(svc.on_snapshot(snap_for(now), now))
        if any(a.name == IDLE_ALERT for a in svc.alerts()):
            return
        time.sleep(0.5)


def test_prometheus_stopped_mid_run_fires_the_self_alert_holds_idle_alerts_then_recovers(
    tmp_path, exporter: HTTPServer, real_prometheus: None
) -> None:
    port = free_port()
    prom = PrometheusProcess(config=_config(exporter.url), data_dir=tmp_path / "data", port=port)
    prom.start()
    reader = PrometheusReader(url=prom.url, timeout=2, retries=1, backoff=0.1)
    svc = _service(reader)

    def snap(
        now: float, *, holders=(("ml", "idle-job", 1, 100_000),), waiting=(("ml", "urgent", 1_000_000),)
    ):
        return snapshot_holding_and_waiting(now, holders=list(holders), waiting=list(waiting))

    try:
        _wait_until_idle(svc, snap)
        held = [a for a in svc.alerts() if a.name == IDLE_ALERT]
        assert svc.health.up and UNREACHABLE_ALERT not in {a.name for a in svc.alerts()}

        prom.stop()
        now = time.time()
        asyncio.run(svc.on_snapshot(snap(now), now))  # must not raise
        names = [a.name for a in svc.alerts()]
        assert UNREACHABLE_ALERT in names
        assert [a for a in svc.alerts() if a.name == IDLE_ALERT] == held  # held, not resolved
        report = svc.report()
        assert report["stale"] and not report["prometheus"]["up"] and report["idle_gpus"] == 1
        assert (
            report["prometheus"]["consecutive_failures"] == 1
            and "cannot connect" in report["prometheus"]["last_error"]
        )

        # Kubernetes is still watched: once nobody waits the alert resolves, though utilisation is unknown;
        # when the queue fills again during the outage, the last reading's alert comes back unchanged
        now = time.time()
        asyncio.run(svc.on_snapshot(snap(now, waiting=()), now))
        assert IDLE_ALERT not in {a.name for a in svc.alerts()}
        assert UNREACHABLE_ALERT in {a.name for a in svc.alerts()} and svc.report()["stale"]
        now = time.time()
        asyncio.run(svc.on_snapshot(snap(now), now))
        assert [a.identity for a in svc.alerts() if a.name == IDLE_ALERT] == [a.identity for a in held]

        # the idle workload finished (Kubernetes says so): the held alert resolves, Prometheus still down
        now = time.time()
        asyncio.run(svc.on_snapshot(snap(now, holders=()), now))
        assert IDLE_ALERT not in {a.name for a in svc.alerts()}
        assert UNREACHABLE_ALERT in {a.name for a in svc.alerts()}

        prom.start()  # same port, same data
        now = time.time()
        asyncio.run(svc.on_snapshot(snap(now), now))
        assert svc.health.up and not svc.report()["stale"]
        assert UNREACHABLE_ALERT not in {a.name for a in svc.alerts()}
    finally:
        reader.close()
        prom.stop()


def test_idle_alert_resolves_on_fresh_figures_once_nothing_waits(tmp_path, exporter, real_prometheus) -> None:
    prom = PrometheusProcess(config=_config(exporter.url), data_dir=tmp_path / "data")
    prom.start()
    reader = PrometheusReader(url=prom.url, timeout=2, retries=1, backoff=0.1)
    svc = _service(reader)
    try:
        _wait_until_idle(
            svc, lambda now: snapshot_waiting(now, namespace="ml", name="u", priority=1_000_000, waited=60)
        )
        # Nobody waits any more: never an alert, while the GPU is still reported idle. A single evaluation
        # can land between scrapes and see the device's window one sample short (a CI run did), so the
        # report gets a few evaluations; the alert must be absent at every one of them.
        idle_seen = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            now = time.time()
            calm = replace(
                snapshot_waiting(now, namespace="ml", name="u", priority=1_000_000, waited=60), workloads=()
            )
            asyncio.run(svc.on_snapshot(calm, now))
            assert IDLE_ALERT not in {a.name for a in svc.alerts()}
            idle_seen.append(svc.report()["idle_gpus"])
            if idle_seen[-1] == 1:
                break
            time.sleep(1)
        assert idle_seen[-1] == 1, idle_seen  # still idle: a plain report, no alert
    finally:
        reader.close()
        prom.stop()


def test_a_failed_kube_state_metrics_scrape_does_not_empty_the_allocation(tmp_path, real_prometheus) -> None:
    pods = [KsmPod("ml", "idle-0", 2, owner_name="idle-job")]
    failing = threading.Event()

    def ksm() -> tuple[int, str, bytes]:
        if failing.is_set():
            return 500, "text/plain", b"kube-state-metrics is overloaded"
        return 200, CONTENT_TYPE, ksm_text(pods, {"ml": None}).encode()

    server = HTTPServer({"/ksm": ksm, "/dcgm": metrics_route(lambda: dcgm_text([]))}).start()
    prom = PrometheusProcess(config=_config(server.url), data_dir=tmp_path / "data")
    prom.start()
    reader = PrometheusReader(url=prom.url, timeout=2, retries=1, backoff=0.1)
    q = ExporterQueries()
    try:
        while not reader.query_sync(q.pod_gpus_allocated()):
            time.sleep(0.3)
        failing.set()
        # wait until Prometheus has seen the failed scrape: `up` is 0 and the plain series are stale
        while reader.query_sync('up{job="kube-state-metrics"} == 0') == [] or reader.query_sync(
            "kube_pod_status_phase"
        ):
            time.sleep(0.3)
        got = reader.query_sync(q.pod_gpus_allocated())
        assert [(s.labels["pod"], s.value) for s in got] == [("idle-0", 2.0)]
        assert reader.query_sync(ExporterQueries(QueryConfig(ksm_bridge=0)).pod_gpus_allocated()) == []
    finally:
        failing.clear()
        reader.close()
        prom.stop()
        server.stop()


# --- a slow, refusing or rejecting server ----------------------------------------------------------------


@pytest.fixture
def slow_server() -> Iterator[HTTPServer]:
    release = threading.Event()

    def slow() -> tuple[int, str, bytes]:
        release.wait(120)  # far longer than any timeout under test
        return 200, "application/json", b'{"status":"success","data":{"resultType":"vector","result":[]}}'

    server = HTTPServer({"/api/v1/query": slow}).start()
    yield server
    release.set()
    server.stop()


def test_slow_prometheus_gives_a_timeout_error_not_a_hang(slow_server: HTTPServer) -> None:
    reader = PrometheusReader(url=slow_server.url, timeout=0.3, retries=1, backoff=0.05)

    async def go() -> None:
        # the outer bound only turns a hang into a failure; the reader must raise its own timeout first
        await asyncio.wait_for(reader.query("up"), 60)

    with pytest.raises(PrometheusTimeout, match="no answer within 0.3s"):
        asyncio.run(go())
    assert slow_server.hits["/api/v1/query"] == 2  # one try and one retry


def test_slow_prometheus_marks_the_service_unhealthy_without_raising(slow_server: HTTPServer) -> None:
    reader = PrometheusReader(url=slow_server.url, timeout=0.3, retries=0)
    svc = _service(reader)
    now = time.time()
    asyncio.run(
        asyncio.wait_for(
            svc.on_snapshot(snapshot_waiting(now, namespace="a", name="b", priority=1, waited=1), now), 60
        )
    )
    assert not svc.health.up and "no answer" in svc.health.last_error
    assert [a.name for a in svc.alerts()] == [UNREACHABLE_ALERT]


def test_connection_refused_is_unavailable_after_the_retries() -> None:
    reader = PrometheusReader(url=f"http://127.0.0.1:{free_port()}", timeout=1, retries=2, backoff=0.01)
    with pytest.raises(PrometheusUnavailable, match="cannot connect"):
        reader.query_sync("up")
    assert reader.failures == 1


def test_rejected_query_is_a_query_error_and_not_retried() -> None:
    body = b'{"status":"error","errorType":"bad_data","error":"parse error"}'
    server = HTTPServer({"/api/v1/query": lambda: (400, "application/json", body)}).start()
    try:
        reader = PrometheusReader(url=server.url, timeout=1, retries=3, backoff=0.01)
        with pytest.raises(PrometheusQueryError, match="rejected"):
            reader.query_sync("up{")
        assert server.hits["/api/v1/query"] == 1
    finally:
        server.stop()


def test_a_503_is_retried_and_a_later_answer_is_used() -> None:
    answers = [
        (503, "text/plain", b"overloaded"),
        (
            200,
            "application/json",
            b'{"status":"success","data":{"resultType":"vector","result":['
            b'{"metric":{"pod":"p"},"value":[1,"3.5"]},{"metric":{"pod":"q"},"value":[1,"oops"]}]}}',
        ),
    ]
    server = HTTPServer({"/api/v1/query": lambda: answers.pop(0)}).start()
    try:
        reader = PrometheusReader(url=server.url, timeout=1, retries=2, backoff=0.01)
        got = reader.query_sync("x")
        assert [(s.labels, s.value) for s in got] == [({"pod": "p"}, 3.5)]
        assert reader.skipped_series == 1  # the malformed value is counted, not fatal
    finally:
        server.stop()


def test_a_200_that_is_not_the_prometheus_api_is_unavailable() -> None:
    server = HTTPServer({"/api/v1/query": lambda: (200, "text/html", b"<html>login</html>")}).start()
    try:
        reader = PrometheusReader(url=server.url, timeout=1, retries=0)
        with pytest.raises(PrometheusUnavailable, match="not a Prometheus API response"):
            reader.query_sync("x")
    finally:
        server.stop()
