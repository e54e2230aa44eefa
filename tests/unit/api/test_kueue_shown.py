"""A Kueue-held job shown: the queue JSON's Kueue fields and ClusterQueues, the status page's source, the
workload page's Kueue section (queue, place, admission and scheduling waits), /metrics' `reason="kueue"`
and `analyze` reading Kueue's kinds from a dump.

The objects are tests/fixtures/real/kueue-shaped-*.json (shaped from Kueue's testdata, see its README)."""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson

from tests.fixtures import FIXTURES
from tests.fixtures.scenario import NOW
from tests.unit.api.conftest import Service, make_service
from watchtower.domain.promql.names import PENDING_WORKLOADS
from watchtower.simulator import objects as o
from watchtower.simulator.forms.kueue import objects as k

REAL = FIXTURES / "real"
AT = NOW + 20 * 60  # the fixtures' Workload was made at NOW + 1
KINDS = {"Workload": "KueueWorkload"}


def items() -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = json.loads((REAL / "kueue-shaped-job-pending.json").read_text())["items"]
    return out


def service() -> Service:
    s = make_service(evaluate=False)
    w = s.container.queue_tracker
    for obj in items():
        w.on_change(KINDS.get(obj["kind"], obj["kind"]), "ADDED", orjson.dumps(obj))
    body = k.pending_workloads(
        [("vision", k.workload_name("Job", "resnet", o.new_uid("job/resnet")), "team", 1)]
    )
    w.on_kueue_positions(
        s.container.queue_tracker.ingestor.decoder.pending_positions(orjson.dumps(body)), {"team-cq"}
    )
    w.evaluate(AT)
    return s


async def get(s: Service, path: str) -> httpx.Response:
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=s.app), base_url="http://t") as c:
        r = await c.get(path)
    assert r.status_code == 200, (path, r.text)
    return r


async def test_the_queue_json_and_pages_show_a_job_kueue_holds() -> None:
    s = service()
    assert s.container.queue_tracker.kueue_waiting_queues() == {"team-cq"}
    body = (await get(s, "/api/v1/queue")).json()
    (w,) = [x for x in body["workloads"] if x["name"] == "resnet"]
    assert (w["kind"], w["source"], w["state"], w["tier"], w["gpus_requested"]) == (
        "Job",
        "kueue",
        "pending",
        "critical",
        8,
    )
    assert w["kueue"]["position"] == 0 and w["kueue"]["cluster_queue"] == "team-cq"
    assert w["admission_wait_seconds"] == w["wait_seconds"] == 20 * 60 - 1
    assert [q["name"] for q in body["kueue_queues"]] == ["team-cq"]
    assert body["kueue_queues"][0]["teams"] == ["vision"]
    status = (await get(s, "/")).text
    assert "read from Kueue Workload job-resnet-" in status
    page = (await get(s, "/workloads/vision/resnet")).text
    assert 'id="kueue"' in page and "<dd>team → team-cq</dd>" in page
    assert '<dd class="kueue-position">#1 in its ClusterQueue</dd>' in page
    assert '<dd class="admission-wait">19m59s</dd>' in page and 'class="scheduling-wait"' not in page
    metrics = (await get(s, "/metrics")).text
    assert f'{PENDING_WORKLOADS}{{namespace="vision",reason="kueue",tier="critical"}} 1.0' in metrics


async def test_a_pods_place_counts_only_what_the_scheduler_holds_and_each_place_says_its_queue() -> None:
    s = make_service(evaluate=False)
    w = s.container.queue_tracker
    for obj in items():
        w.on_change(KINDS.get(obj["kind"], obj["kind"]), "ADDED", orjson.dumps(obj))
    # A pod of the same tier and priority, younger than the held job: the job is before it in the order,
    # yet it has no pod in the scheduler's queue, so it is not ahead of the pod; the demo's debug-1 is.
    msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    pod = o.pod(
        name="eval-1",
        namespace="vision",
        created=NOW + 60,
        gpus=8,
        priority=1_000_000,
        priority_class="urgent-debug",
        conditions=[o.unschedulable(NOW + 61, msg)],
    )
    w.on_change("Pod", "ADDED", orjson.dumps(pod))
    w.evaluate(AT)
    body = (await get(s, "/api/v1/queue")).json()
    by = {x["name"]: x for x in body["workloads"]}
    held, queued = by["resnet"], by["eval-1"]
    assert held["tier"] == queued["tier"] == "critical"
    assert (queued["ahead"], queued["position_in_tier"], queued["position_queue"]) == (1, 2, "scheduler")
    assert by["serve-canary"]["ahead"] == 2  # debug-1 and eval-1: the held job is in no one's way
    assert (held["ahead"], held["position_in_tier"], held["position_queue"]) == (0, None, "kueue")
    assert held["kueue"]["position"] is None  # no visibility API answer here
    assert "held by Kueue" in held["start_estimate"]["text"]
    status = (await get(s, "/")).text
    assert "#2 in its tier in the scheduler's queue" in status  # eval-1, behind debug-1 only
    assert "its place in ClusterQueue team-cq is not known" in status
    page = (await get(s, "/workloads/vision/resnet?kind=Job")).text
    assert "in Kueue's queue, not the scheduler's" in page
    positions = k.pending_workloads(
        [("vision", k.workload_name("Job", "resnet", o.new_uid("job/resnet")), "team", 1)]
    )
    w.on_kueue_positions(w.ingestor.decoder.pending_positions(orjson.dumps(positions)), {"team-cq"})
    w.evaluate(AT + 1)
    status = (await get(s, "/")).text
    assert "#1 in Kueue&#39;s queue (ClusterQueue team-cq), not yet in the scheduler&#39;s" in status


def test_analyze_reads_kueue_kinds_from_a_dump() -> None:
    from watchtower.adapters.kube.decoder import ObjectDecoder
    from watchtower.config import Settings
    from watchtower.services.analyze import analysis_dict, analyze

    settings = Settings()
    result = analyze(
        orjson.dumps(o.object_list(items())),
        policy=settings.queue_policy(),
        decoder=ObjectDecoder(team_label=settings.teams.label),
        at=AT,
    )
    doc = analysis_dict(result, settings.queue_policy(), settings)
    (w,) = [x for x in doc["workloads"] if x["name"] == "resnet"]
    assert (w["source"], w["kueue"]["local_queue"], w["kueue"]["position"]) == ("kueue", "team", None)
    assert doc["kueue_queues"][0]["gpus_nominal"] == 8
    assert doc["ignored_kinds"] == {}


def test_analyze_alerts_a_held_job_at_its_tier_and_as_stuck_when_its_queue_has_the_quota() -> None:
    from watchtower.adapters.kube.decoder import ObjectDecoder
    from watchtower.config import Settings
    from watchtower.services.analyze import analysis_dict, analyze

    settings = Settings()

    def alerts(objs: list[dict[str, Any]]) -> dict[tuple[str, str], dict[str, Any]]:
        result = analyze(
            orjson.dumps(o.object_list(objs)),
            policy=settings.queue_policy(),
            decoder=ObjectDecoder(team_label=settings.teams.label),
            at=AT,
        )
        doc = analysis_dict(result, settings.queue_policy(), settings)
        return {(a["rule"], a["labels"]["workload"]): a for a in doc["alerts"]}

    full = alerts(items())
    # Critical tier (its WorkloadPriorityClass), 20 minutes: past the 15-minute critical threshold.
    assert ("WorkloadWaitCritical", "resnet") in full
    assert ("WorkloadStuckDespiteCapacity", "resnet") not in full  # its ClusterQueue is at its quota
    freed = items()
    cq = next(i for i in freed if i["kind"] == "ClusterQueue")
    for usage in ("flavorsReservation", "flavorsUsage"):
        cq["status"][usage][0]["resources"][0]["total"] = "0"
    stuck = alerts(freed)[("WorkloadStuckDespiteCapacity", "resnet")]
    assert "not admitted by Kueue though ClusterQueue team-cq has 8 GPU(s) of quota free" in stuck["summary"]
