"""The links an alert carries answer: built from the URL the service is actually reachable at."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx

from tests.fixtures.scenario import NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from tests.unit.api.conftest import live_server
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.app import create_app
from watchtower.api.deps import require_token
from watchtower.api.routes.alerts import build_router
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.config.loading import settings_from_mapping
from watchtower.domain.alerts.payload import generator_url
from watchtower.domain.gpu_usage import IdleWhileWaiting, WorkloadUsage, idle_alerts
from watchtower.domain.workloads import WorkloadKey
from watchtower.runtime.sockets import bind, reachable_at, served_url
from watchtower.simulator import objects as o


def test_external_url_is_the_port_actually_bound_unless_the_configuration_names_one() -> None:
    sock = bind("127.0.0.1", 0)
    try:
        port = sock.getsockname()[1]
        s = reachable_at(Settings(), served_url("127.0.0.1", sock))
        assert s.server.external_url == f"http://127.0.0.1:{port}"
        rules = s.rule_settings()
        assert rules.status_url == f"http://127.0.0.1:{port}"
        assert rules.runbook_url == f"http://127.0.0.1:{port}/runbooks"
        own = settings_from_mapping({"server": {"external_url": "https://wt.example"}}, env={})
        assert reachable_at(own, served_url("127.0.0.1", sock)).server.external_url == "https://wt.example"
    finally:
        sock.close()


def test_a_wildcard_address_is_linked_by_the_machines_name() -> None:
    sock = bind("0.0.0.0", 0)
    try:
        assert served_url("0.0.0.0", sock) == f"http://{socket.gethostname()}:{sock.getsockname()[1]}"
    finally:
        sock.close()


async def test_an_alert_links_a_runbook_section_and_its_workloads_page_that_answer(tmp_path: Path) -> None:
    # As `watchtower run` does: bind (a free port), derive the URL, then build the service around it.
    sock = bind("127.0.0.1", 0)
    settings = reachable_at(Settings(), served_url("127.0.0.1", sock))
    cluster = demo_cluster()
    source = ReplaySource(cluster)
    clock = ManualClock()
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    c = build_container(
        settings, clock=clock, source_health=source.feed_health, source_name="replay", alert_store=store
    )
    assert c.alerting is not None
    list_everything(c.queue_tracker, cluster)
    source.listed = set(cluster.objects)
    await c.alerting.on_tick(c.queue_tracker.evaluate(clock.now()))
    app = create_app(c, routers=[build_router(c.alerting.admin, require_token=require_token, clock=clock)])
    try:
        with live_server(app, sock) as url:
            assert url == settings.server.external_url
            async with httpx.AsyncClient(timeout=10) as http:
                alerts = (await http.get(f"{url}/api/v1/alerts")).json()
                (alert,) = [
                    a
                    for a in alerts
                    if a["labels"]["alertname"] == "WorkloadWaitCritical"
                    and a["labels"]["workload"] == "debug-1"
                ]
                ann = alert["annotations"]
                assert ann["runbook_url"] == f"{url}/runbooks#workloadwaitcritical"
                assert ann["status_url"] == f"{url}/workloads/ops/debug-1?kind=Pod"
                runbook = await http.get(ann["runbook_url"])
                assert runbook.status_code == 200 and '<h2 id="workloadwaitcritical">' in runbook.text
                page = await http.get(ann["status_url"])
                assert page.status_code == 200 and "ops/debug-1" in page.text
                assert "WorkloadWaitCritical" in page.text.split('id="alerts"')[1]
                # The status page's alert row links the same page, relative to where the page is read.
                status = (await http.get(f"{url}/")).text
                assert '<a href="/workloads/ops/debug-1?kind=Pod">ops/debug-1</a>' in status
    finally:
        store.close()


async def test_a_gpu_idle_alerts_link_opens_its_workloads_page_not_a_namesakes(tmp_path: Path) -> None:
    """GPUIdleWhileQueueWaits names the kind `workload_kind`: its link must carry it, or the page of a
    waiting pod named as the idle PaddleJob opens instead."""
    sock = bind("127.0.0.1", 0)
    settings = reachable_at(Settings(), served_url("127.0.0.1", sock))
    cluster = demo_cluster()
    # A bare pod of the idle PaddleJob's name in its namespace: two workloads vision/resnet.
    cluster.add(o.pod(name="resnet", namespace="vision", created=NOW - 600, gpus=1))
    source = ReplaySource(cluster)
    clock = ManualClock()
    c = build_container(settings, clock=clock, source_health=source.feed_health, source_name="replay")
    list_everything(c.queue_tracker, cluster)
    source.listed = set(cluster.objects)
    c.queue_tracker.evaluate(clock.now())
    usage = WorkloadUsage(
        key=WorkloadKey("vision", "PaddleJob", "resnet"),
        team="vision",
        priority_class="batch",
        pods=("resnet-worker-0",),
        gpus_allocated=8.0,
        gpus=8,
        slices=0,
        idle_gpus=8,
        idle_slices=0,
        idle_gpu_equivalent=8.0,
        util_avg=0.0,
    )
    (alert,) = idle_alerts(
        [IdleWhileWaiting(usage, "low", (WorkloadKey("ops", "Pod", "debug-1"),), "critical")]
    )
    app = create_app(c)
    with live_server(app, sock) as url:
        link = generator_url(alert.labels, url)
        assert link == f"{url}/workloads/vision/resnet?kind=PaddleJob"
        async with httpx.AsyncClient(timeout=10) as http:
            page = await http.get(link)
            assert page.status_code == 200 and "vision/resnet" in page.text and "PaddleJob" in page.text
            # Without the kind the same path opens the waiting namesake pod's page: the link needs it.
            kindless = await http.get(f"{url}/workloads/vision/resnet")
            assert kindless.status_code == 200 and "PaddleJob" not in kindless.text
            assert "kind=Pod" in kindless.text
