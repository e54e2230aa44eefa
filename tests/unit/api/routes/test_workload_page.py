"""Each workload's own page, `/workloads/{namespace}/{name}`: what a user lands on from an alert."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from markupsafe import escape

from tests.fixtures.scenario import (
    HOSTILE,
    NO_GPU,
    NOW,
    ManualClock,
    ReplaySource,
    demo_cluster,
    list_everything,
    paddle_owner,
)
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.app import create_app
from watchtower.api.container import Container
from watchtower.api.routes.status_page import CSP
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.config.model import ServerConfig
from watchtower.services.alerting import build_alerting
from watchtower.simulator import objects as o

# Kubernetes would refuse such a name; the page must not trust that it did. (No "/": a path could not hold it.)
HOSTILE_NAME = "evil<b>bold<img src=x onerror=\"document.title='pwned'\">&"


def job_owner(name: str) -> dict[str, Any]:
    return o.owner_ref("Job", name, api_version="batch/v1", uid=o.new_uid(f"job/{name}"))


def waiting_pod(name: str, **kw: Any) -> dict[str, Any]:
    return o.pod(
        namespace="vision",
        created=NOW - 600,
        gpus=8,
        priority=500_000,
        priority_class="experiment",
        conditions=[o.unschedulable(NOW - 595, NO_GPU)],
        name=name,
        **kw,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteAlertStore]:
    s = SQLiteAlertStore(tmp_path / "alerts.db")
    yield s
    s.close()


async def page_client(*extra: dict[str, Any], store: SQLiteAlertStore | None = None) -> httpx.AsyncClient:
    cluster = demo_cluster().add(*extra)
    source = ReplaySource(cluster)
    clock = ManualClock()
    settings = Settings().model_copy(update={"server": ServerConfig(external_url="http://watchtower.test")})
    c: Container = build_container(
        settings, clock=clock, source_health=source.feed_health, source_name="replay"
    )
    list_everything(c.queue_tracker, cluster)
    source.listed = set(cluster.objects)
    tick = c.queue_tracker.evaluate(clock.now())
    if store is not None:
        alerting = build_alerting(settings=settings, store=store)
        await alerting.on_tick(tick)
        c = dataclasses.replace(c, alerting=alerting, alert_store=store)
    return httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(c)), base_url="http://watchtower.test"
    )


@pytest.fixture
async def client(store: SQLiteAlertStore) -> AsyncIterator[httpx.AsyncClient]:
    extra = [
        waiting_pod("twin-0", owner=job_owner("twin")),
        waiting_pod("twin-1", owner=paddle_owner("twin")),
        waiting_pod(HOSTILE_NAME, annotations={"watchtower.io/note": HOSTILE}),
    ]
    async with await page_client(*extra, store=store) as c:
        yield c


async def test_a_waiting_workloads_page_says_its_wait_thresholds_why_and_pods(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/workloads/ops/debug-1")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"] == CSP
    page = r.text
    assert "<title>Watchtower · ops/debug-1</title>" in page
    assert "<b>20m</b> waiting since" in page and "warn after 5m, critical after 15m (tier critical)" in page
    assert "no node fits (4 tried): 4 nodes lack 8 free GPUs" in page  # why, in the service's words
    assert "Insufficient nvidia.com/gpu" in page  # the scheduler's reasons
    assert "8 requested (8 per pod) · 0 held" in page and "oldest pending pod" in page


async def test_a_gangs_page_names_the_nodes_where_its_bound_pods_hold_gpus(client: httpx.AsyncClient) -> None:
    page = (await client.get("/workloads/nlp/bert?kind=PaddleJob")).text
    assert "1 bound · 1 pending" in page and "a gang" in page
    assert '<tr><td>gpu-3</td><td class="num">4</td></tr>' in page


async def test_the_nodes_holding_a_gangs_gpus_are_shown_when_the_tick_lists_no_holders() -> None:
    """The Tick lists every workload's holders only while an urgent workload is stuck; the page asks for its
    own workload's nodes itself."""
    cluster = demo_cluster()
    source = ReplaySource(cluster)
    clock = ManualClock()
    c = build_container(Settings(), clock=clock, source_health=source.feed_health, source_name="replay")
    list_everything(c.queue_tracker, cluster)
    c.queue_tracker.latest = dataclasses.replace(c.queue_tracker.evaluate(clock.now()), holders=())
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=create_app(c)), base_url="http://t") as cl:
        page = (await cl.get("/workloads/nlp/bert?kind=PaddleJob")).text
    assert '<tr><td>gpu-3</td><td class="num">4</td></tr>' in page


async def test_a_quota_refused_workloads_page_words_the_quota_as_the_api_server_does(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/workloads/vision/detector?kind=PaddleJob")).text
    assert "refused by quota" in page or "quota" in page
    line = next(ln for ln in page.splitlines() if "<dt>quota</dt>" in ln)
    assert (
        "requested requests.nvidia.com/gpu=8, used requests.nvidia.com/gpu=16 of requests.nvidia.com/gpu=16"
        in line
    )
    assert "{" not in line  # no Python dict on the page


async def test_a_workloads_page_lists_the_preemptions_it_suffered_with_the_preemptor(
    client: httpx.AsyncClient,
) -> None:
    page = (await client.get("/workloads/vision/old-batch-0")).text
    assert "Preemptions it suffered <small>1 in the window" in page
    assert "nlp/bert-worker-0" in page and "gpu-3" in page


async def test_a_workloads_page_lists_the_alerts_about_it_and_no_others(client: httpx.AsyncClient) -> None:
    page = (await client.get("/workloads/ops/debug-1")).text
    alerts = page.split('id="alerts"')[1]
    assert "WorkloadWaitCritical" in alerts
    assert 'href="http://watchtower.test/runbooks#workloadwaitcritical"' in alerts
    assert "sweep-7" not in alerts and "serve-canary" not in alerts


async def test_an_unknown_workload_answers_404_in_words(client: httpx.AsyncClient) -> None:
    r = await client.get("/workloads/ops/nothing-here")
    assert r.status_code == 404
    assert r.headers["content-security-policy"] == CSP
    assert "No workload ops/nothing-here in the queue" in r.text
    assert "finished ones are forgotten" in r.text


async def test_an_ambiguous_name_answers_409_with_a_link_per_kind(client: httpx.AsyncClient) -> None:
    r = await client.get("/workloads/vision/twin")
    assert r.status_code == 409
    assert "vision/twin names several workloads" in r.text
    assert 'href="/workloads/vision/twin?kind=Job"' in r.text
    assert 'href="/workloads/vision/twin?kind=PaddleJob"' in r.text
    assert (await client.get("/workloads/vision/twin?kind=Job")).status_code == 200


async def test_a_hostile_name_and_annotation_are_shown_as_inert_text(client: httpx.AsyncClient) -> None:
    r = await client.get(f"/workloads/vision/{quote(HOSTILE_NAME, safe='')}")
    assert r.status_code == 200, r.text
    page = r.text
    assert str(escape(HOSTILE_NAME)) in page and HOSTILE_NAME not in page
    assert str(escape(HOSTILE)) in page
    assert "<script" not in page and "<img" not in page and "<b>bold" not in page
    # The same name in a path that matches nothing: escaped on the 404 page too.
    gone = await client.get("/workloads/%3Cscript%3Ex/%3Cimg%20src%3Dx%3E")
    assert gone.status_code == 404
    assert "&lt;script&gt;x/&lt;img src=x&gt;" in gone.text and "<img" not in gone.text


async def test_the_status_page_links_each_waiting_workload_to_its_page(client: httpx.AsyncClient) -> None:
    page = (await client.get("/")).text
    assert '<a href="/workloads/ops/debug-1?kind=Pod">ops/debug-1</a>' in page
    assert '<a href="/workloads/nlp/bert?kind=PaddleJob">nlp/bert</a>' in page  # queue row and partial gang
    assert '<a href="/runbooks">Runbooks</a>' in page


async def test_without_alerting_the_page_says_so() -> None:
    async with await page_client() as c:
        page = (await c.get("/workloads/ops/debug-1")).text
    assert "Alerting is not running here: no alert store." in page
