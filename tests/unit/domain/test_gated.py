"""The gated form (issue 30 part 1): work held by scheduling gates is waiting work, attributed to the system
that holds the gate.

Shapes from upstream: the API server's `PodScheduled=False SchedulingGated` (the captured
tests/fixtures/real/pod-scheduling-gated.json); Kueue's plain-pod groups as sigs.k8s.io/kueue
pkg/controller/jobs/pod makes them (pods gated by `kueue.x-k8s.io/admission`, labelled
`kueue.x-k8s.io/pod-group-name`, annotated `kueue.x-k8s.io/pod-group-total-count`; one Workload named after
the group, owned by each pod with no controller reference, annotated `kueue.x-k8s.io/is-group-workload`);
Volcano 1.15's queue gate (volcano-sh/volcano docs/design/scheduling-gates-queue-admission.md: pods opt in
with the annotation `scheduling.volcano.sh/queue-allocation-gate` and carry the gate of the same name until
their queue has room).
"""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from typing import Any

from tests.fixtures import FIXTURES
from tests.unit.domain.helpers import NS, POLICY, T0, apply, running_pod
from watchtower.domain.patterns import anchored
from watchtower.domain.queue import QueueEvaluator, QueueSnapshot, WorkloadState
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.queue_json import workload_dict
from watchtower.simulator import objects as o
from watchtower.simulator.forms.gangs import volcano_objects as v
from watchtower.simulator.forms.kueue import objects as k

GATED = o.condition(
    "PodScheduled",
    "False",
    T0,
    reason="SchedulingGated",
    message="Scheduling is blocked due to non-empty scheduling gates",
)


def gated_pod(name: str, gates: list[str], *, created: float = T0, **kw: Any) -> dict[str, Any]:
    return o.pod(
        name=name, namespace=NS, created=created, gpus=2, scheduling_gates=gates, conditions=[GATED], **kw
    )


def evaluate(state: ClusterState, now: float, *, expected: tuple[str, ...] = ()) -> QueueSnapshot:
    policy = replace(POLICY, expected_gates=tuple(anchored(g) for g in expected))
    return QueueEvaluator(policy).evaluate(state, now=now, include_running=True)


def state_of(*objs: dict[str, Any]) -> ClusterState:
    st = ClusterState()
    for obj in objs:
        apply(st, obj)
    return st


# ---- a gate no known system owns ------------------------------------------------------------------------


def test_a_gate_no_system_owns_holds_waiting_work_named_and_alerted() -> None:
    snap = evaluate(state_of(gated_pod("prefetch", ["example.com/prefetch"])), T0 + 42 * 60)
    (w,) = snap.workloads
    assert (w.state, w.since, w.pods_gated, w.pods_pending) == (WorkloadState.PENDING, T0, 1, 0)
    assert w.waiting and w.severity == ""  # 42m is under its tier's (low) warning threshold
    assert w.why == "held by scheduling gate example.com/prefetch since 2027-01-15T08:00:00Z"
    assert w.scheduling_reason == "SchedulingGated" and w.gpus_per_pod == 2
    doc = workload_dict(w)
    assert doc["pods_gated"] == 1
    assert doc["gated"] == {
        "owner": "other",
        "gates": ["example.com/prefetch"],
        "since": "2027-01-15T08:00:00Z",
        "held_for_seconds": 42 * 60,
        "expected": False,
    }


def test_a_gate_held_past_its_tiers_threshold_alerts_like_other_waiting_work() -> None:
    (w,) = evaluate(state_of(gated_pod("prefetch", ["example.com/prefetch"])), T0 + 86400).workloads
    assert w.waiting and w.severity == "critical"


def test_an_expected_gate_is_listed_but_never_alerted() -> None:
    st = state_of(gated_pod("prefetch", ["example.com/prefetch", "example.com/licence"]))
    (w,) = evaluate(st, T0 + 86400, expected=("example.com/prefetch", r"example\.com/lic.*")).workloads
    assert w.state is WorkloadState.GATED and not w.waiting and w.severity == ""
    assert w.why == (
        "held by scheduling gates example.com/licence, example.com/prefetch since 2027-01-15T08:00:00Z "
        "(an expected gate: listed, not alerted)"
    )
    assert workload_dict(w)["gated"]["expected"] is True
    # One gate not expected: the work waits.
    (w,) = evaluate(st, T0 + 86400, expected=("example.com/prefetch",)).workloads
    assert w.state is WorkloadState.PENDING and w.severity == "critical"


def test_the_captured_gated_pod_waits_behind_its_gate() -> None:
    raw = json.loads((FIXTURES / "real" / "pod-scheduling-gated.json").read_text())
    (w,) = evaluate(state_of(raw), 1795994456.0 + 60).workloads
    assert w.state is WorkloadState.PENDING and w.pods_gated == 1
    assert workload_dict(w)["gated"]["gates"] == ["example.com/quota-check"]


def test_a_gated_pod_beside_queued_ones_is_counted_and_the_queued_ones_say_the_wait() -> None:
    queued = o.pod(
        name="q",
        namespace=NS,
        created=T0 + 5,
        gpus=2,
        owner=o.owner_ref("Job", "j", api_version="batch/v1", uid="job-uid"),
        conditions=[o.unschedulable(T0 + 6, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")],
    )
    gated = gated_pod(
        "g", ["example.com/prefetch"], owner=o.owner_ref("Job", "j", api_version="batch/v1", uid="job-uid")
    )
    (w,) = evaluate(state_of(queued, gated), T0 + 60).workloads
    assert (w.state, w.pods_pending, w.pods_gated, w.since) == (WorkloadState.PENDING, 1, 1, T0 + 5)
    assert w.why == "no node fits (1 tried): 1 node lacks 2 free GPUs"


# ---- Kueue's plain-pod groups ---------------------------------------------------------------------------

GROUP = "train"
KUEUE_GROUP = {"kueue.x-k8s.io/pod-group-name": GROUP, "kueue.x-k8s.io/queue-name": "team-queue"}


def group_pod(
    i: int, *, total: str = "4", gates: tuple[str, ...] = ("kueue.x-k8s.io/admission",)
) -> dict[str, Any]:
    return gated_pod(
        f"{GROUP}-{i}",
        list(gates),
        created=T0 + i,
        labels=KUEUE_GROUP,
        annotations={"kueue.x-k8s.io/pod-group-total-count": total},
        priority_class="urgent-debug",
        priority=1000000,
    )


def group_workload(pods: list[dict[str, Any]], *, created: float = T0 + 3) -> dict[str, Any]:
    """The Workload Kueue's pod reconciler makes for a group: named after the group, owned by each pod
    without a controller reference (pod_controller.go ConstructComposableWorkload, SetOwnerReference)."""
    fake_job = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": GROUP, "namespace": NS, "uid": "x"}}
    wl = k.workload(
        job=fake_job,
        queue="team-queue",
        created=created,
        pod_sets=[("a1b2c3d4", 4, {"spec": pods[0]["spec"]})],
        pending=(created, k.pending_message("a1b2c3d4", "default-flavor", 8)),
    )
    meta = wl["metadata"]
    meta["name"] = GROUP
    meta["annotations"] = {"kueue.x-k8s.io/is-group-workload": "true"}
    meta["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": p["metadata"]["name"], "uid": p["metadata"]["uid"]}
        for p in pods
    ]
    return wl


def kueue_queues() -> list[dict[str, Any]]:
    return [
        k.cluster_queue("research-cq", nominal_gpus=4, reserved_gpus=4, pending=1),
        k.local_queue(NS, "team-queue", "research-cq"),
    ]


def test_a_kueue_pod_group_is_one_workload_joined_with_its_kueue_workload() -> None:
    pods = [group_pod(i) for i in range(3)]  # 3 of the group's 4 made so far
    st = state_of(*kueue_queues(), *pods, group_workload(pods))
    (w,) = evaluate(st, T0 + 600).workloads
    assert w.key == WorkloadKey(NS, "KueueWorkload", GROUP)
    assert (w.state, w.since, w.pods_gated, w.pods_expected) == (WorkloadState.PENDING, T0, 3, 4)
    assert (w.gpus_per_pod, w.gpus_requested) == (2, 8)
    assert w.why == (
        "held by Kueue: waiting for quota in ClusterQueue research-cq (couldn't assign flavors to pod set "
        "a1b2c3d4: insufficient unused quota for nvidia.com/gpu in flavor default-flavor, 8 more needed)"
    )
    doc = workload_dict(w)
    assert doc["gated"]["owner"] == "kueue" and doc["pods_gated"] == 3
    assert doc["kueue"]["workload"] == GROUP


def test_a_kueue_pod_group_before_its_workload_is_held_by_kueue_and_waits() -> None:
    pods = [group_pod(i, gates=("kueue.x-k8s.io/admission", "kueue.x-k8s.io/topology")) for i in range(4)]
    (w,) = evaluate(state_of(*pods), T0 + 60).workloads
    assert (w.state, w.pods_gated, w.pods_expected) == (WorkloadState.PENDING, 4, 4)
    assert w.why == f"held by Kueue: no Kueue Workload for pod group {GROUP} seen yet"


def test_a_group_workload_naming_pods_that_do_not_exist_is_not_waiting_work_and_is_said_once() -> None:
    # Kueue makes a group's Workload from the group's pods; with none of them there (deleted, or never
    # seen), nothing of it can run: listing it would alert on-call about work that does not exist.
    pods = [group_pod(i) for i in range(2)]
    st = state_of(*kueue_queues(), group_workload(pods))
    ev = QueueEvaluator(POLICY)
    assert ev.evaluate(st, now=T0 + 600, include_running=True).workloads == ()
    assert ev.odd_news() == [
        (
            WorkloadKey(NS, "KueueWorkload", GROUP),
            "KueueWorkload",
            "a Kueue Workload no job owns, naming pods that do not exist: not listed",
            "not_real_work",
        )
    ]
    ev.evaluate(st, now=T0 + 660, include_running=True)
    assert ev.odd_news() == []  # said once, not at every tick
    for p in pods:  # its pods seen after all: the group waits as one workload again
        apply(st, p)
    (w,) = ev.evaluate(st, now=T0 + 700, include_running=True).workloads
    assert (w.key.kind, w.state, w.pods_gated) == ("KueueWorkload", WorkloadState.PENDING, 2)


def test_a_pod_group_size_that_is_not_a_number_is_read_as_the_pods_seen() -> None:
    pods = [group_pod(i, total="four") for i in range(2)]
    (w,) = evaluate(state_of(*pods), T0 + 60).workloads
    assert (w.pods_gated, w.pods_expected, w.gpus_requested) == (2, 0, 4)


def test_once_ungated_the_groups_pods_say_the_wait_and_run() -> None:
    pods = [group_pod(i) for i in range(4)]
    st = state_of(*pods)
    for i in range(4):
        apply(st, running_pod(f"{GROUP}-{i}", "gpu-1", created=T0 + i, labels=KUEUE_GROUP, gpus=2))
    (w,) = evaluate(st, T0 + 600).workloads
    assert (w.state, w.pods_gated, w.pods_running) == (WorkloadState.RUNNING, 0, 4)
    assert workload_dict(w)["gated"] is None


# ---- Volcano's queue gate -------------------------------------------------------------------------------


def test_a_volcano_gated_pod_is_its_podgroups_workload_held_by_its_queue() -> None:
    group = copy.deepcopy(json.loads((FIXTURES / "real" / "volcano-podgroup-shaped.json").read_text()))
    del group["metadata"]["ownerReferences"]
    group["status"] = {"phase": "Pending"}
    queue = v.queue("vision-q", created=T0 - 3600, capability_gpus=8)
    queue["status"]["allocated"]["nvidia.com/gpu"] = "8"
    pods = [
        gated_pod(
            f"ocr-{i}",
            ["scheduling.volcano.sh/queue-allocation-gate"],
            created=T0 + i,
            annotations={
                "scheduling.k8s.io/group-name": "ocr-train",
                "scheduling.volcano.sh/queue-allocation-gate": "true",
            },
        )
        for i in range(4)
    ]
    (w,) = evaluate(state_of(queue, group, *pods), T0 + 600).workloads
    assert w.key == WorkloadKey(NS, "PodGroup", "ocr-train")
    assert (w.state, w.since, w.pods_gated, w.pods_expected) == (WorkloadState.PENDING, T0, 4, 4)
    assert (w.source, w.queue, w.group) == ("volcano-podgroup", "vision-q", "ocr-train")
    assert w.why == "held by Volcano queue vision-q: its capability is used up (8 of 8 GPUs allocated)"
    assert workload_dict(w)["gated"]["owner"] == "volcano"
