"""Issue 13, Kueue: the running service against Kueue v0.17.0's real controller manager (tests/e2e/kueue/) and the
real control plane. A Job Kueue holds (suspended, no pods) is reported waiting from its Workload and alerted at
its tier's threshold; admitted, its pods run; a higher-priority Workload makes Kueue preempt it, and the
preemption names the preemptor Workload. The service reads with nothing but deploy/base/rbac.yaml's token.
"""

from __future__ import annotations

import contextlib
import time
from datetime import datetime
from typing import Any

import httpx
import pytest

from tests.e2e.api import wait_for
from tests.e2e.controlplane.cluster import ControlPlane, tail
from tests.e2e.kueue import objects as k
from tests.e2e.kueue.manager import VISIBILITY_API, KueueManager
from tests.e2e.kueue.story import GPUS, Story
from tests.e2e.scenario import Scenario
from tests.e2e.test_service_api import metric, service_watching
from tests.e2e.webhooks import HookReceiver

pytestmark = pytest.mark.e2e

NS, HOME = "e2e-kueue", "e2e-kueue-watchtower"
# The low tier's thresholds (class `batch`, 100,000): the queued Job crosses both while it waits.
WARN_AFTER, CRITICAL_AFTER = 3, 6


def _t(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _tiers() -> list[dict[str, Any]]:
    """The low tier (class `batch`) alerts within the test; the others keep thresholds far beyond it."""
    far = {"warn_after": "1h", "critical_after": "2h"}
    return [
        {"name": "critical", "min_priority": 1_000_000, "classes": ["urgent-debug"], **far},
        {"name": "high", "min_priority": 900_000, **far},
        {"name": "medium", "min_priority": 500_000, **far},
        {
            "name": "low",
            "min_priority": 0,
            "warn_after": f"{WARN_AFTER}s",
            "critical_after": f"{CRITICAL_AFTER}s",
        },
    ]


def _row(web: httpx.Client, name: str, **params: str) -> dict[str, Any] | None:
    doc = web.get("/api/v1/queue", params={"namespace": NS, **params}).json()
    return next((w for w in doc["workloads"] if w["name"] == name), None)


def test_a_job_kueue_holds_is_alerted_admitted_run_then_preempted_by_a_named_kueue_workload(
    scenario: Scenario, control_plane: ControlPlane, kueue: KueueManager
) -> None:
    s, admin = scenario, scenario.api
    t0 = time.monotonic()
    s.node("gpu-kq1", gpus=GPUS)
    s.namespace(HOME)
    ns = s.namespace(NS, team="research")
    story = Story(admin, ns)
    with contextlib.ExitStack() as stack:
        stack.callback(story.cleanup)
        web, hooks = stack.enter_context(
            service_watching(s, control_plane, home=HOME, suffix="-e2e-kueue", tiers=_tiers())
        )
        _story_through_the_service(s, story, web, hooks, kueue)
    print(f"\nKueue scenario took {time.monotonic() - t0:.1f}s")


def _story_through_the_service(
    s: Scenario, story: Story, web: httpx.Client, hooks: HookReceiver, kueue: KueueManager
) -> None:
    def ready() -> dict[str, Any] | None:
        r = web.get("/readyz")
        return r.json() if r.status_code == 200 else None

    readiness = wait_for("/readyz 200 with the read-only token", ready, timeout=90)
    assert readiness["skipped_objects"] == {}
    before = web.get("/metrics").text
    preempted_before = metric(
        before, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="critical"
    )

    # ---- queued: suspended, no pods, Kueue's words -----------------------------------------------------
    story.queues()
    pending = story.queue_behind_blocker()
    job = s.api.get(f"/apis/batch/v1/namespaces/{story.ns}/jobs/train")
    assert job["spec"]["suspend"] is True
    assert story.pods("train") == []
    cond = k.condition(pending, "QuotaReserved")
    assert cond is not None
    # pkg/scheduler/flavorassigner/flavorassigner.go, v0.17.0.
    assert (cond["reason"], cond["message"]) == (
        "Pending",
        f"couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu in flavor "
        f"{story.flavor}, 4 more needed",
    )
    # The visibility API answers through the aggregation layer: the service can place it in its queue.
    listed = s.api.get(f"/apis/{VISIBILITY_API}/v1beta2/clusterqueues/{story.cluster_queue}/pendingworkloads")
    assert [(w["metadata"]["name"], w["positionInClusterQueue"]) for w in listed["items"]] == [
        (pending["metadata"]["name"], 0)
    ]

    seen: list[Any] = [None]

    def reported_waiting() -> dict[str, Any] | None:
        seen[0] = w = _row(web, "train")
        return w if w and w.get("source") == "kueue" else None

    try:
        w = wait_for("the service reporting train waiting in Kueue", reported_waiting, timeout=30)
    except AssertionError as e:
        raise AssertionError(
            f"{e}\nthe service's row: {seen[0]}\n{tail(s.workdir / 'service.err')}"
        ) from None
    assert (w["kind"], w["state"], w["tier"], w["team"]) == ("Job", "pending", "low", "research")
    assert w["gpus_requested"] == 4
    assert w["pods_existing"] == 0
    assert w["scheduling_reason"] == "Pending"
    assert "insufficient unused quota for nvidia.com/gpu" in w["why"], w["why"]
    q = w["kueue"]
    assert (q["workload"], q["local_queue"], q["cluster_queue"]) == (
        pending["metadata"]["name"],
        story.local_queue,
        story.cluster_queue,
    )
    assert (q["admitted"], q["admitted_at"], q["reason"], q["message"]) == (
        False,
        None,
        "Pending",
        cond["message"],
    )
    assert w["admission_wait_seconds"] == pytest.approx(w["wait_seconds"], abs=1.5)
    assert w["scheduling_wait_seconds"] is None

    # Its tier's critical threshold crossed while Kueue held it: one signed alert for the Job.
    firing = wait_for(
        "a WorkloadWaitCritical webhook for train",
        lambda: [
            a
            for a in hooks.alerts("WorkloadWaitCritical", story.ns, "firing")
            if a["labels"]["workload"] == "train"
        ],
        timeout=CRITICAL_AFTER + 30,
    )
    labels = firing[0]["labels"]
    assert {key: labels[key] for key in ("severity", "tier", "team", "kind")} == {
        "severity": "critical",
        "tier": "low",
        "team": "research",
        "kind": "Job",
    }
    assert int(firing[0]["annotations"]["wait_seconds"]) >= CRITICAL_AFTER
    assert time.time() - _t(pending["metadata"]["creationTimestamp"]) >= CRITICAL_AFTER
    blocker_alerts = [
        a
        for d in hooks.received()
        for a in d.payload.get("alerts", [])
        if a["labels"].get("workload") == "blocker"
    ]
    assert blocker_alerts == [], "the admitted blocker never waited past a threshold"

    # ---- admitted: the Job controller's pods, bound by the scheduler, Running -------------------------------
    admitted = story.free_quota()
    reserved = k.condition(admitted, "QuotaReserved")
    assert reserved is not None and reserved["status"] == "True"

    def running() -> dict[str, Any] | None:
        r = web.get(f"/api/v1/workloads/{story.ns}/train", params={"kind": "Job"})
        doc = r.json() if r.status_code == 200 else None
        return (
            doc
            if doc and doc["workload"]["state"] == "running" and doc["workload"]["pods_running"] == 2
            else None
        )

    doc = wait_for("the service showing train running with its 2 pods", running, timeout=30)
    run = doc["workload"]
    assert run["gpus_held"] == 4
    assert run["kueue"]["admitted"] is True
    assert _t(run["kueue"]["admitted_at"]) == pytest.approx(_t(reserved["lastTransitionTime"]), abs=1)
    time.sleep(2)  # it runs a while: there is work to lose

    # ---- preempted by a higher-priority Workload --------------------------------------------------------
    victim = story.preempt()
    preemptor = story.workload("urgent")
    assert preemptor is not None
    preempted = k.condition(victim, "Preempted")
    assert preempted is not None and preempted["reason"] == "InClusterQueue"
    # pkg/scheduler/preemption/preemption.go: the preemptor by uid only.
    assert (
        f"(UID: {preemptor['metadata']['uid']}, JobUID: {story.jobs['urgent']['metadata']['uid']})"
        in preempted["message"]
    )

    def attributed() -> list[dict[str, Any]] | None:
        rows = web.get("/api/v1/preemptions", params={"namespace": story.ns}).json()["preemptions"]
        rows = [p for p in rows if p["preemptor_kind"] == "KueueWorkload"]
        return rows or None

    rows = wait_for("the service recording Kueue's preemption of train", attributed, timeout=30)
    assert len(rows) == 1, rows
    p = rows[0]
    assert p["victim_uid"] == victim["metadata"]["uid"]
    assert p["victim_workload"] == {"kind": "Job", "name": "train"}
    assert p["victim_tier"] == "low"
    assert p["kueue_reason"] == "InClusterQueue"
    assert p["preemptor_uid"] == preemptor["metadata"]["uid"]
    assert (p["preemptor_namespace"], p["preemptor_name"], p["preemptor_tier"]) == (
        story.ns,
        preemptor["metadata"]["name"],
        "critical",
    )
    assert p["gpus"] == 4
    assert p["gpu_hours_lost"] is not None and p["gpu_hours_lost"] > 0

    # The preemptor admitted and running; the victim back in Kueue's queue, the preemption counted once.
    story.preemptor_runs()
    back = wait_for(
        "train waiting in Kueue again",
        lambda: (w := _row(web, "train", state="waiting")) and w.get("source") == "kueue" and w,
        timeout=30,
    )
    assert back["kueue"]["evictions"] >= 1
    text = web.get("/metrics").text
    assert (
        metric(text, "watchtower_preemptions_total", victim_tier="low", preemptor_tier="critical")
        - preempted_before
        == 1
    )
    mine = web.get(f"/api/v1/workloads/{story.ns}/train", params={"kind": "Job"}).json()
    assert [x["victim_uid"] for x in mine["preemptions"]] == [victim["metadata"]["uid"]]
    # `analyze` on a dump of the same cluster: it reads the Kueue kinds too, and the pods Kueue's eviction
    # took away are the preemption, not an "other disruption".
    doc = s.analyze("kueue-requeued")
    assert [x["preemptor_kind"] for x in doc["preemptions"]] == ["KueueWorkload"]
    assert doc["disruptions"] == [], doc["disruptions"]
    assert kueue.alive(), f"Kueue's manager exited:\n{kueue.tail()}"

    # Its place in the ClusterQueue, as the visibility API gives it (reachable here through the aggregation
    # layer, with the read-only token's `get` on pendingworkloads).
    listed = s.api.get(f"/apis/{VISIBILITY_API}/v1beta2/clusterqueues/{story.cluster_queue}/pendingworkloads")
    assert [(x["metadata"]["name"], x["positionInClusterQueue"]) for x in listed["items"]] == [
        (victim["metadata"]["name"], 0)
    ]
    placed = wait_for(
        "the service giving train's position from the visibility API",
        lambda: (w := _row(web, "train", state="waiting")) and w["kueue"]["position"] == 0 and w,
        timeout=45,  # the service reads it every 30 s (adapters/kube/visibility.py)
    )
    assert placed["kueue"]["workload"] == victim["metadata"]["name"]
