"""Work held by its gang or its job, shown: where each wait was read from, "3 of 4 pods exist", the Volcano
Queue as the team's entitlement (queue JSON, analyze, status page, workload page) and the pending-age
gauges of /metrics that the Prometheus rules read.

The objects are the fixtures of tests/fixtures/real (shaped from the upstream types, see its README), moved
to the scenario's clock.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest
from markupsafe import escape

from tests.fixtures import FIXTURES
from tests.fixtures.scenario import HOSTILE, NOW, base_cluster
from tests.unit.api.conftest import Service, make_service
from watchtower.domain.promql.names import OLDEST_WAIT, PENDING_WORKLOADS
from watchtower.simulator import objects as o

REAL = FIXTURES / "real"
MIN = 60.0


def real(fixture: str, /, *, created: float, **meta: Any) -> dict[str, Any]:
    obj: dict[str, Any] = json.loads((REAL / f"{fixture}.json").read_text())
    obj["metadata"]["creationTimestamp"] = o.ts(created)
    obj["metadata"].update(meta)
    return obj


def gang_pod(i: int, created: float) -> dict[str, Any]:
    """A 1.36 pod of PodGroup trainer-0: in PreEnqueue, with no condition and no event (DESIGN §3.14)."""
    p = o.pod(
        name=f"trainer-{i}",
        namespace="vision",
        created=created + i,
        gpus=2,
        priority=500_000,
        priority_class="experiment",
    )
    p["spec"]["schedulingGroup"] = {"podGroupName": "trainer-0"}
    return p


def volcano_job(name: str, namespace: str, queue: str, created: float) -> list[tuple[str, dict[str, Any]]]:
    """A PaddleJob with no pods yet, its Volcano PodGroup Pending in `queue`."""
    job = real(
        "paddlejob-pending-no-pods", created=created, name=name, namespace=namespace, uid=f"uid-{name}"
    )
    job["spec"]["schedulingPolicy"]["queue"] = queue
    group = real("volcano-podgroup-shaped", created=created, name=name, namespace=namespace)
    group["metadata"]["ownerReferences"][0].update(name=name, uid=f"uid-{name}")
    group["spec"]["queue"] = queue
    return [("VolcanoPodGroup", group), ("PaddleJob", job)]


def held_work() -> list[tuple[str, dict[str, Any]]]:
    """An incomplete upstream gang (3 of minCount 4), a PaddleJob in Volcano queue vision-q, a PaddleJob with
    no pods and no Volcano, and one in a queue with a hostile name (not in `vision`, whose quota is full)."""
    plain = real("paddlejob-pending-no-pods", created=NOW - 40 * MIN, name="etl-prep", namespace="nlp")
    del plain["spec"]["schedulingPolicy"]["queue"]
    hostile_q = real("volcano-queue", created=NOW - 86400, name=HOSTILE)
    return [
        ("PodGroup", real("podgroup-v1alpha2-gang-incomplete", created=NOW - 30 * MIN)),
        *(("Pod", gang_pod(i, NOW - 25 * MIN)) for i in range(3)),
        ("VolcanoQueue", real("volcano-queue", created=NOW - 86400)),
        *volcano_job("ocr-train", "nlp", "vision-q", NOW - 20 * MIN),
        ("PaddleJob", plain),
        ("VolcanoQueue", hostile_q),
        *volcano_job("odd-queue", "ops", HOSTILE, NOW - 10 * MIN),
    ]


def service(*, demo: bool = True) -> Service:
    s = make_service(evaluate=False, cluster=None if demo else base_cluster())
    w = s.container.queue_tracker
    for kind, obj in held_work():
        w.on_change(kind, "ADDED", orjson.dumps(obj))
    w.evaluate(NOW)
    return s


@pytest.fixture(scope="module")
def svc() -> Service:
    return service()


async def get(s: Service, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        r = await c.get(path)
    assert r.status_code == 200, (path, r.text)
    return r


def by_name(body: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {w["name"]: w for w in body["workloads"]}


VISION_Q = {
    "name": "vision-q",
    "weight": 4,
    "state": "Open",
    "gpus_capability": 32,
    "gpus_deserved": 16,
    "gpus_guarantee": 8,
    "gpus_allocated": 12,
    "namespaces": ["nlp"],
    "teams": ["language"],
}


async def test_the_queue_json_says_where_each_wait_was_read_from_and_lists_the_volcano_queues(
    svc: Service,
) -> None:
    body = (await get(svc, "/api/v1/queue?limit=1000")).json()
    w = by_name(body)
    gang, volcano, plain = w["trainer-0"], w["ocr-train"], w["etl-prep"]
    assert (
        gang["kind"],
        gang["source"],
        gang["pod_group"],
        gang["pods_existing"],
        gang["pods_expected"],
    ) == (
        "PodGroup",
        "podgroup",
        "trainer-0",
        3,
        4,
    )
    assert gang["why"] == "gang incomplete: 3 of minCount 4 pods exist"
    assert (volcano["source"], volcano["pod_group"], volcano["volcano_queue"]) == (
        "volcano-podgroup",
        "ocr-train",
        "vision-q",
    )
    # Volcano's "4/4 tasks in gang unschedulable: ..., 4 minAvailable" read as the diagnosis' gang counts.
    assert (volcano["gang_min"], volcano["gang_placed"]) == (4, 0)
    assert (volcano["preemption_node"], volcano["preemption_victims"]) == (None, None)
    assert (plain["source"], plain["why"], plain["pods_existing"], plain["pods_expected"]) == (
        "paddlejob",
        "no pods created yet",
        0,
        4,
    )
    assert body["volcano_queues"][-1] == VISION_Q
    assert [q["name"] for q in body["volcano_queues"]] == sorted([HOSTILE, "vision-q"])
    assert body["volcano_queues"][0]["namespaces"] == ["ops"]
    # Whatever the filters: the entitlement is the cluster's, not the page's.
    team_page = (await get(svc, "/api/v1/queue?team=language")).json()
    assert team_page["volcano_queues"] == body["volcano_queues"]


async def test_a_1_36_preemption_placement_is_in_the_workload_json_and_on_its_page() -> None:
    s = make_service(evaluate=False)
    msg = (
        "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: found a potential placement "
        "for pod on node gpu-2, preempting 3 victims"
    )
    p = o.pod(
        name="eval-9",
        namespace="nlp",
        created=NOW - 5 * MIN,
        gpus=8,
        priority=500_000,
        priority_class="experiment",
        conditions=[o.unschedulable(NOW - 4 * MIN, msg)],
    )
    s.container.queue_tracker.on_change("Pod", "ADDED", orjson.dumps(p))
    s.container.queue_tracker.evaluate(NOW)
    doc = (await get(s, "/api/v1/workloads/nlp/eval-9")).json()["workload"]
    assert (doc["preemption"], doc["preemption_node"], doc["preemption_victims"]) == ("possible", "gpu-2", 3)
    assert (doc["gang_min"], doc["gang_placed"]) == (None, None)
    page = (await get(s, "/workloads/nlp/eval-9")).text
    assert (
        "<dt>preemption dry run</dt><dd>preemption found a placement on node gpu-2, evicting 3 pod(s)</dd>"
        in page
    )


async def test_the_status_page_names_the_object_each_wait_was_read_from(svc: Service) -> None:
    page = (await get(svc, "/")).text
    assert "read from PodGroup trainer-0 · 3 of 4 pods exist" in page
    assert "read from Volcano PodGroup ocr-train in queue vision-q · 0 of 4 pods exist" in page
    assert "read from PaddleJob status · 0 of 4 pods exist" in page
    # A hostile queue name is escaped like every other string.
    assert str(escape(f"read from Volcano PodGroup odd-queue in queue {HOSTILE}")) in page
    assert HOSTILE not in page


async def test_the_workload_page_shows_its_volcano_queues_entitlement(svc: Service) -> None:
    page = (await get(svc, "/workloads/nlp/ocr-train")).text
    assert '<dd class="source">Volcano PodGroup ocr-train in queue vision-q</dd>' in page
    assert '<dd class="exist">0 of 4 pods exist (group ocr-train)</dd>' in page
    assert (
        "<dt>gang placement</dt><dd>the scheduler could place 0 of the gang&#39;s minimum 4 pods</dd>" in page
    )
    assert "Volcano queue vision-q <small>its team's entitlement · weight 4 · Open</small>" in page
    for key, gpus in (("capability", 32), ("deserved", 16), ("guarantee", 8), ("allocated", 12)):
        assert f'<tr><td>{key}</td><td class="sub">' in page and f'<td class="num">{gpus}</td></tr>' in page
    assert "named by namespaces nlp · teams language" in page
    gang = (await get(svc, "/workloads/vision/trainer-0?kind=PodGroup")).text
    assert '<dd class="source">PodGroup trainer-0</dd>' in gang and 'id="volcano-queue"' not in gang
    odd = (await get(svc, "/workloads/ops/odd-queue")).text
    assert str(escape(f"Volcano queue {HOSTILE}")) in odd and HOSTILE not in odd


async def test_a_queue_whose_object_was_not_read_says_so() -> None:
    s = make_service(evaluate=False)
    for kind, obj in volcano_job("lost-q", "nlp", "nowhere-q", NOW - 5 * MIN):
        s.container.queue_tracker.on_change(kind, "ADDED", orjson.dumps(obj))
    s.container.queue_tracker.evaluate(NOW)
    page = (await get(s, "/workloads/nlp/lost-q")).text
    assert "<h2>Volcano queue nowhere-q</h2>" in page
    assert "Its Queue object has not been read" in page


def test_analyze_lists_the_volcano_queues_with_the_namespaces_naming_them() -> None:
    from watchtower.adapters.kube.decoder import ObjectDecoder
    from watchtower.config import Settings
    from watchtower.services.analyze import analysis_dict, analyze

    c = base_cluster()
    items = [*c.all(), *(obj for _, obj in held_work())]
    settings = Settings()
    decoder = ObjectDecoder(team_label=settings.teams.label)
    result = analyze(
        orjson.dumps(o.object_list(items)), policy=settings.queue_policy(), decoder=decoder, at=NOW
    )
    doc = analysis_dict(result, settings.queue_policy(), settings)
    assert doc["volcano_queues"][-1] == VISION_Q
    assert by_name(doc)["trainer-0"]["pods_existing"] == 3


async def test_gang_held_work_shows_in_the_pending_age_gauges_with_its_tier() -> None:
    # No other waiting work: each gauge line is the held workloads' own.
    s = service(demo=False)
    metrics = (await get(s, "/metrics")).text
    # The oldest waits in `medium` (PriorityClass experiment): etl-prep, a PaddleJob with no pods, 40 min.
    assert f'{OLDEST_WAIT}{{tier="medium"}} 2400.0' in metrics
    # The incomplete PodGroup (pods with no condition) and the PaddleJobs count as waiting, in their tier.
    pending = sorted(line for line in metrics.splitlines() if line.startswith(PENDING_WORKLOADS + "{"))
    assert (
        pending
        == [
            f'{PENDING_WORKLOADS}{{namespace="nlp",reason="gang cannot be placed",tier="medium"}} 1.0',  # ocr-train
            f'{PENDING_WORKLOADS}{{namespace="nlp",reason="no_pods",tier="medium"}} 1.0',  # etl-prep: no pods
            f'{PENDING_WORKLOADS}{{namespace="ops",reason="gang cannot be placed",tier="medium"}} 1.0',
            f'{PENDING_WORKLOADS}{{namespace="vision",reason="gang_incomplete",tier="medium"}} 1.0',  # trainer-0
        ]
    )
