"""The HTTP API end to end: the app built by create_app over a QueueTracker fed through the ClusterSource port."""

from __future__ import annotations

import logging

import httpx
import orjson
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.scenario import HOSTILE, NOW, demo_cluster
from tests.unit.api.conftest import TOKEN, Service, make_service
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config import Settings
from watchtower.runtime.tick_loop import TickLoop
from watchtower.services.analyze import analysis_dict, analyze


async def test_healthz_answers_while_the_cluster_is_still_being_listed() -> None:
    s = make_service(listed=False, evaluate=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        r = await c.get("/healthz")
        assert r.status_code == 200
        assert r.json()["status"] == "ok"
        # Leader election off: this process leads, and says so.
        assert r.json()["leadership"] | {"identity": "", "holder": ""} == {
            "enabled": False,
            "role": "leader",
            "identity": "",
            "holder": "",
            "transitions": 0,
        }
        ready = await c.get("/readyz")
        assert ready.status_code == 503
        assert "Pod: not listed yet" in ready.json()["problems"]
        q = await c.get("/api/v1/queue")
        assert q.status_code == 503
        assert "not been evaluated yet" in q.json()["detail"]


async def test_readyz_is_200_when_listed_and_fresh_and_503_with_per_kind_staleness_otherwise(
    service: Service, client: httpx.AsyncClient
) -> None:
    r = await client.get("/readyz")
    assert r.status_code == 200
    body = r.json()
    assert body["ready"] is True
    # The controllers behind quota refusals are required kinds; PaddleJob's CRD is optional.
    assert set(body["kinds"]) == {
        "Pod",
        "Event",
        "Node",
        "Namespace",
        "PriorityClass",
        "ResourceQuota",
        "Job",
        "ReplicaSet",
    }
    service.source.stale_seconds = 900.0
    r = await client.get("/readyz")
    assert r.status_code == 503
    assert r.json()["kinds"]["Pod"]["stale_seconds"] == 900.0
    assert any("900s stale" in p for p in r.json()["problems"])


async def test_metrics_over_real_http_have_the_prometheus_content_type_and_parse(live: str) -> None:
    async with httpx.AsyncClient() as c:
        r = await c.get(f"{live}/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    for name in (
        "watchtower_pending_workloads",
        "watchtower_oldest_wait_seconds",
        "watchtower_time_to_schedule_seconds",
        "watchtower_startup_latency_seconds",
        "watchtower_preemptions",
        "watchtower_preemption_gpu_hours_lost",
        "watchtower_partial_gangs",
        "watchtower_quota_gpus_used",
        "watchtower_quota_gpus_hard",
        "watchtower_malformed_objects_skipped",
        "watchtower_watch_restarts",
        "watchtower_picture_staleness_seconds",
        "watchtower_evaluation_duration_seconds",
    ):
        assert name in families, name
    pending = {
        (s.labels["tier"], s.labels["namespace"], s.labels["reason"]): s.value
        for s in families["watchtower_pending_workloads"].samples
    }
    assert pending[("critical", "ops", "Insufficient nvidia.com/gpu")] == 1
    preempted = [s for s in families["watchtower_preemptions"].samples if s.name.endswith("_total")]
    assert [(s.labels, s.value) for s in preempted] == [
        ({"victim_tier": "low", "preemptor_tier": "medium"}, 1.0)
    ]


async def test_queue_json_is_the_same_document_analyze_prints_for_the_same_objects(
    client: httpx.AsyncClient,
) -> None:
    settings = Settings()
    decoder = ObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
    )
    offline = analysis_dict(
        analyze(demo_cluster().dump(), policy=settings.queue_policy(), decoder=decoder, at=NOW),
        settings.queue_policy(),
    )
    r = await client.get("/api/v1/queue")
    assert r.status_code == 200
    body = r.json()
    assert body["at"] == offline["at"]
    # A tick evaluates the waiting workloads; running ones are answered one by one (/api/v1/workloads).
    waiting = [w for w in offline["workloads"] if w["state"] != "running"]
    assert any(w["state"] == "running" for w in offline["workloads"])
    assert body["workloads"] == waiting
    assert body["count"] == body["total"] == len(waiting)


async def test_queue_filters_by_tier_namespace_team_and_state(client: httpx.AsyncClient) -> None:
    names = lambda r: [(w["namespace"], w["name"]) for w in r.json()["workloads"]]  # noqa: E731
    assert names(await client.get("/api/v1/queue", params={"tier": "critical"})) == [("ops", "debug-1")]
    assert names(await client.get("/api/v1/queue", params={"team": "language", "state": "partial"})) == [
        ("nlp", "bert")
    ]
    waiting = await client.get("/api/v1/queue", params={"namespace": "vision", "state": "waiting"})
    assert sorted(names(waiting)) == [("vision", "detector"), ("vision", "sweep-7")]
    both = await client.get("/api/v1/queue", params=[("tier", "critical"), ("tier", "high")])
    assert names(both) == [("ops", "debug-1"), ("nlp", "serve-canary")]
    limited = await client.get("/api/v1/queue", params={"state": "waiting", "limit": 2})
    assert limited.json()["count"] == 2 and limited.json()["total"] == 5
    rest = await client.get("/api/v1/queue", params={"state": "waiting", "limit": 2, "offset": 4})
    assert rest.json()["count"] == 1
    assert names(limited) + names(
        await client.get("/api/v1/queue", params={"state": "waiting", "offset": 2, "limit": 2})
    ) + names(rest) == names(await client.get("/api/v1/queue", params={"state": "waiting"}))


async def test_queue_refuses_unknown_filters_with_a_clear_message(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/queue", params={"tier": "urgent"})
    assert r.status_code == 422
    assert r.json()["detail"] == "unknown tier 'urgent'; tiers are: critical, high, low, medium"
    r = await client.get("/api/v1/queue", params={"state": "stuck"})
    assert r.status_code == 422
    assert "unknown state 'stuck'" in r.json()["detail"]


async def test_workload_detail_gives_why_and_preemptions_and_404_names_what_is_missing(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/api/v1/workloads/ops/debug-1")
    assert r.status_code == 200
    w = r.json()["workload"]
    assert w["severity"] == "critical"
    assert w["why"].startswith("no node fits")
    assert w["annotations"] == {"watchtower.io/note": HOSTILE}
    victim = await client.get("/api/v1/workloads/vision/old-batch-0")
    assert [p["preemptor_name"] for p in victim.json()["preemptions"]] == ["bert-worker-0"]
    missing = await client.get("/api/v1/workloads/ops/nothing-here")
    assert missing.status_code == 404
    assert missing.headers["content-type"] == "application/json"
    assert missing.json()["detail"].startswith("no workload ops/nothing-here in the queue")


async def test_preemptions_list_victim_preemptor_and_gpu_hours_lost(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/preemptions")
    assert r.status_code == 200
    [p] = r.json()["preemptions"]
    assert (p["victim_name"], p["victim_tier"], p["preemptor_name"], p["preemptor_tier"]) == (
        "old-batch-0",
        "low",
        "bert-worker-0",
        "medium",
    )
    assert p["gpu_hours_lost"] == pytest.approx(4 * 3900 / 3600, abs=1e-5)
    none = await client.get("/api/v1/preemptions", params={"namespace": "nlp"})
    assert none.json()["count"] == 0


async def test_mutations_need_the_bearer_token_and_the_token_is_never_logged(
    client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    assert (await client.post("/api/v1/echo")).status_code == 401
    wrong = await client.post("/api/v1/echo", headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert wrong.headers["www-authenticate"] == "Bearer"
    ok = await client.post("/api/v1/echo", headers={"Authorization": f"Bearer {TOKEN}"})
    assert ok.status_code == 200
    assert TOKEN not in caplog.text


async def test_mutations_are_refused_when_no_token_is_configured() -> None:
    s = make_service(token=None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        r = await c.post("/api/v1/echo", headers={"Authorization": "Bearer anything"})
    assert r.status_code == 403
    assert "no server.api_token is configured" in r.json()["detail"]


async def test_a_new_evaluation_replaces_the_cached_queue_document(
    service: Service, client: httpx.AsyncClient
) -> None:
    first = (await client.get("/api/v1/queue", params={"tier": "critical"})).json()["workloads"][0][
        "wait_seconds"
    ]
    service.clock.t += 60
    service.container.queue_tracker.evaluate(service.clock.now())
    second = (await client.get("/api/v1/queue", params={"tier": "critical"})).json()["workloads"][0][
        "wait_seconds"
    ]
    assert second == first + 60


async def test_a_tick_builds_the_queue_documents_before_any_request_asks() -> None:
    s = make_service(evaluate=False)
    picture = await TickLoop(s.container).tick()
    current = s.container.documents.current
    assert current is not None and current.tick is picture


async def test_the_preemptor_tier_is_still_shown_after_the_preemptor_pod_is_gone(
    service: Service, client: httpx.AsyncClient
) -> None:
    # The preemptor ran and was deleted before the next evaluation: the page, the API and /metrics still
    # name its tier, from what the service recorded when the preemption was first attributed.
    w = service.container.queue_tracker
    [bert] = [p for p in service.source.cluster.objects["Pod"] if p["metadata"]["name"] == "bert-worker-0"]
    w.on_change("Pod", "DELETED", orjson.dumps(bert))
    w.evaluate(service.clock.now() + 60)
    [p] = (await client.get("/api/v1/preemptions")).json()["preemptions"]
    assert (p["preemptor_name"], p["preemptor_tier"]) == ("bert-worker-0", "medium")
    page = (await client.get("/")).text
    section = page.split('<section id="preemptions">', 1)[1].split("</section>", 1)[0]
    [row] = [r for r in section.split("<tr>") if "old-batch-0" in r]
    assert "<td>nlp/bert-worker-0</td><td>medium</td>" in row
    metrics = (await client.get("/metrics")).text
    assert 'watchtower_preemptions_total{preemptor_tier="medium",victim_tier="low"} 1.0' in metrics


async def test_on_the_simulator_the_page_says_which_clock_each_time_is() -> None:
    # The simulator's clock runs 60x: five real minutes are five simulated hours. The header is cluster
    # time and says it is simulated; the idle-GPU figures are Prometheus's, stamped with the wall clock,
    # and their age is reckoned against the wall clock (it read "5h3m53s ago" after 5 real minutes).
    import dataclasses
    import re
    import time

    from tests.unit.api.test_openapi import scenario_gpu
    from watchtower.api.app import create_app

    svc = make_service()
    c = svc.container
    gpu = scenario_gpu(c)
    wall = time.time() - 42  # Prometheus answered 42 real seconds ago
    await gpu.refresh(wall)
    await gpu.on_snapshot(c.queue_tracker.evaluate(svc.clock.now() + 5 * 3600).snapshot, wall)
    app = create_app(dataclasses.replace(c, gpu=gpu, source_name="sim"))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as client:
        page = (await client.get("/")).text
    header = page.split("<header>", 1)[1].split("</header>", 1)[0]
    assert re.search(r"source: sim · evaluated \S+Z \(simulated time, 60× real\)", header), header
    idle = page.split('<section id="idle-gpus">', 1)[1].split("</h2>", 1)[0]
    assert re.search(r"as of \S+ wall clock, (4[2-9]|5\d)s ago", idle), idle


async def test_every_answer_names_the_replica_that_gave_it(client: httpx.AsyncClient) -> None:
    # Behind a Service each replica answers from its own picture: the reader can tell which one it got.
    identity = (await client.get("/healthz")).json()["leadership"]["identity"]
    assert identity
    for path in ("/api/v1/queue", "/metrics", "/api/v1/workloads/vision/ghost", "/"):
        r = await client.get(path)
        assert r.headers["X-Watchtower-Replica"] == identity, path
