"""Kueue-held jobs: suspended with no pods, waiting for quota, admitted, preempted by another Workload.

The objects are shaped from Kueue's own types, test wrappers and condition words (tests/fixtures/real/
kueue-shaped-*.json, written by watchtower/simulator/forms/kueue/objects.py; see the fixtures README)."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.fixtures import FIXTURES
from tests.unit.domain.helpers import DECODER, NS, T0, TIERS, apply, evaluate, raw, running_pod
from watchtower.adapters.kube.decoder import DecodeError
from watchtower.domain.forms.kueue.records import SOURCE_KUEUE
from watchtower.domain.queue import WorkloadState
from watchtower.domain.state import ClusterState, PreemptionSeen
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.queue_json import snapshot_dict, workload_dict
from watchtower.simulator import objects as o
from watchtower.simulator.forms.kueue import objects as k

REAL = FIXTURES / "real"
JOB = WorkloadKey(NS, "Job", "resnet")
SWEEP = WorkloadKey(NS, "Job", "sweep")


def load(name: str) -> Any:
    return json.loads((REAL / f"{name}.json").read_text())


def pending_state() -> tuple[ClusterState, dict[str, Any]]:
    """Return the state of a queued Job (suspended, no pods) on a ClusterQueue at its quota, and its Job."""
    st = ClusterState()
    items = load("kueue-shaped-job-pending")["items"]
    for obj in items:
        apply(st, obj)
    return st, next(i for i in items if i["kind"] == "Job")


def test_a_workload_decodes_its_queue_gpus_priority_and_why_it_waits() -> None:
    wl = next(i for i in load("kueue-shaped-job-pending")["items"] if i["kind"] == "Workload")
    w = DECODER.decode("KueueWorkload", raw(wl))
    assert (w.local_queue, w.pods, w.gpus, w.gpus_per_pod) == ("team", 2, 8, 4)
    assert (w.priority, w.priority_class, w.priority_class_kind) == (
        1_000_000,
        "urgent-kueue",
        "WorkloadPriorityClass",
    )
    assert w.owner is not None and (w.owner.kind, w.owner.name) == ("Job", "resnet")
    assert (w.reserved, w.reason) == (False, "Pending")
    assert w.message.startswith("couldn't assign flavors to pod set main: insufficient unused quota")
    assert w.waiting


def test_a_v1beta1_workload_names_its_class_by_name_and_source() -> None:
    wl = next(i for i in load("kueue-shaped-job-pending")["items"] if i["kind"] == "Workload")
    old = copy.deepcopy(wl)
    old["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    del old["spec"]["priorityClassRef"], old["spec"]["priority"]
    old["spec"]["priorityClassName"] = "urgent-kueue"
    old["spec"]["priorityClassSource"] = "kueue.x-k8s.io/workloadpriorityclass"
    w = DECODER.decode("KueueWorkload", raw(old))
    assert (w.priority, w.priority_class, w.priority_class_kind) == (
        None,
        "urgent-kueue",
        "WorkloadPriorityClass",
    )
    # Without spec.priority the value comes from the WorkloadPriorityClass the state holds.
    st, _ = pending_state()
    assert st.kueue_priority(w) == (1_000_000, "urgent-kueue")
    cq = k.cluster_queue("old-cq", nominal_gpus=16, reserved_gpus=4, borrowing_limit=8)
    cq["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    cq["spec"]["cohort"] = "research"
    q = DECODER.decode("ClusterQueue", raw(cq))
    assert (q.cohort, q.nominal_gpus, q.borrowing_limit_gpus, q.free_nominal) == ("research", 16, 8, 12)


def test_hostile_kueue_objects_are_decode_errors_not_crashes() -> None:
    wl = next(i for i in load("kueue-shaped-job-pending")["items"] if i["kind"] == "Workload")
    bad = copy.deepcopy(wl)
    bad["spec"]["podSets"][0]["count"] = -3
    with pytest.raises(DecodeError):
        DECODER.decode("KueueWorkload", raw(bad))
    nameless = copy.deepcopy(wl)
    del nameless["metadata"]["name"]
    with pytest.raises(DecodeError):
        DECODER.decode("KueueWorkload", raw(nameless))
    with pytest.raises(DecodeError):
        DECODER.decode("ClusterQueue", b'{"metadata": {"name": "x"}, "spec": {"resourceGroups": "many"}}')
    with pytest.raises(DecodeError):
        DECODER.decode("WorkloadPriorityClass", b'{"metadata": {"name": "x"}}')


def test_a_suspended_job_with_no_pods_waits_in_kueue_at_its_workloads_tier() -> None:
    st, _ = pending_state()
    now = T0 + 20 * 60
    snap = evaluate(st, now)
    (w,) = snap.workloads
    assert w.key == JOB
    assert (w.state, w.source, w.scheduling_reason) == (WorkloadState.PENDING, SOURCE_KUEUE, "Pending")
    # The WorkloadPriorityClass, not the pod template's `batch`, sets the tier.
    assert (w.tier, w.priority, w.priority_class) == ("critical", 1_000_000, "urgent-kueue")
    assert (w.gpus_requested, w.gpus_per_pod, w.pods_pending) == (8, 4, 0)
    assert w.since == T0 + 1 and w.wait_seconds == pytest.approx(now - T0 - 1)
    assert "held by Kueue in ClusterQueue team-cq" in w.why and "insufficient unused quota" in w.why
    # Past the critical tier's 15 minutes: the wait alert's severity, as for any waiting workload.
    assert w.severity == "critical"
    d = workload_dict(w)
    assert d["source"] == "kueue" and d["state"] == "pending"
    assert d["kueue"] == {
        "workload": k.workload_name("Job", "resnet", o.new_uid("job/resnet")),
        "local_queue": "team",
        "cluster_queue": "team-cq",
        "admitted": False,
        "admitted_at": None,
        "reason": "Pending",
        "message": d["kueue"]["message"],
        "position": None,
        "evictions": 0,
    }
    assert d["admission_wait_seconds"] == d["wait_seconds"] and d["scheduling_wait_seconds"] is None
    doc = snapshot_dict(snap, TIERS, st)
    (cq,) = doc["kueue_queues"]
    assert (cq["name"], cq["gpus_nominal"], cq["gpus_reserved"]) == ("team-cq", 8, 8)
    assert cq["local_queues"] == [{"namespace": NS, "name": "team"}] and cq["namespaces"] == [NS]


def test_admitted_the_wait_goes_on_with_its_pods_and_the_two_waits_add_up() -> None:
    st, job = pending_state()
    apply(st, load("kueue-shaped-workload-admitted"))
    # Not one pod made yet: admitted, still waiting for its job to create them.
    snap = evaluate(st, T0 + 601)
    (w,) = snap.workloads
    assert w.state is WorkloadState.PENDING and "waiting for its job to create its pods" in w.why
    uid = job["metadata"]["uid"]
    owner = o.owner_ref("Job", "resnet", api_version="batch/v1", uid=uid)
    msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: 4 No preemption victims found for incoming pod."
    for i in range(2):
        p = o.pod(
            name=f"resnet-{i}",
            uid=f"resnet-{i}-uid",
            namespace=NS,
            created=T0 + 605,
            gpus=4,
            owner=owner,
            priority=1_000_000,
            priority_class="batch",
            conditions=[o.unschedulable(T0 + 606, msg)],
        )
        apply(st, p)
    now = T0 + 1200
    (w,) = evaluate(st, now).workloads
    assert (w.state, w.source, w.pods_pending) == (WorkloadState.PENDING, "pods", 2)
    assert w.since == T0 + 1  # the whole wait: Kueue's and then the scheduler's
    assert w.admission_wait == pytest.approx(599)
    assert w.scheduling_wait == pytest.approx(now - T0 - 600)
    assert w.admission_wait + w.scheduling_wait == pytest.approx(w.wait_seconds)
    d = workload_dict(w)
    assert d["kueue"]["admitted"] is True and d["kueue"]["admitted_at"] == o.ts(T0 + 600)
    for i in range(2):
        apply(
            st,
            running_pod(
                f"resnet-{i}", f"gpu-{i}", created=T0 + 605, uid=f"resnet-{i}-uid", gpus=4, owner=owner
            ),
        )
    assert evaluate(st, now).workloads == ()


def test_positions_from_the_visibility_api_reach_the_workload() -> None:
    st, _ = pending_state()
    name = k.workload_name("Job", "resnet", o.new_uid("job/resnet"))
    body = k.pending_workloads([(NS, "other-wl", "team", 5), (NS, name, "team", 1_000_000)])
    st.forms.kueue.set_positions(DECODER.pending_positions(raw(body)), {"team-cq"})
    (w,) = evaluate(st, T0 + 60).workloads
    assert w.kueue is not None and w.kueue.position == 1
    st.forms.kueue.set_positions({}, {"team-cq"})  # gone from the list: no position, not a stale one
    ev = evaluate(st, T0 + 60)
    assert ev.workloads[0].kueue is not None and ev.workloads[0].kueue.position is None


def test_a_kueue_preemption_is_a_preemption_with_its_preemptor_workload_and_tiers() -> None:
    st, _ = pending_state()
    victim = load("kueue-shaped-workload-preempted")
    happened = apply(st, victim)
    (seen,) = [h for h in happened if isinstance(h, PreemptionSeen)]
    p = seen.preemption
    assert (p.preemptor_kind, p.kueue_reason, p.reason) == ("KueueWorkload", "InClusterQueue", "Preempted")
    assert p.preemptor_name == k.workload_name("Job", "resnet", o.new_uid("job/resnet"))
    assert p.preemptor_tier(TIERS) == "critical" and p.victim_tier(TIERS) == "low"
    assert p.victim_workload == SWEEP and p.victim_gpus == 8
    assert p.gpu_hours_lost == pytest.approx(8 * 4000 / 3600)  # from PodsReady to the preemption
    assert apply(st, victim) == []  # a replay records nothing twice
    snap = evaluate(st, T0 + 700, include_running=True)
    assert snap.disruptions == ()
    assert snap.recent_preemptions.counts[SWEEP] == 1
    doc = snapshot_dict(snap, TIERS, st)
    (rec,) = doc["preemptions"]
    assert (rec["preemptor_kind"], rec["kueue_reason"], rec["preemptor_tier"]) == (
        "KueueWorkload",
        "InClusterQueue",
        "critical",
    )


def test_a_preemptor_seen_after_its_victim_is_attributed_when_it_comes() -> None:
    items = load("kueue-shaped-job-pending")["items"]
    st = ClusterState()
    for obj in items:
        if obj["kind"] != "Workload":
            apply(st, obj)
    (first,) = apply(st, load("kueue-shaped-workload-preempted"))
    assert isinstance(first, PreemptionSeen) and first.preemption.preemptor_tier(TIERS) is None
    later = apply(st, next(i for i in items if i["kind"] == "Workload"))
    (done,) = [h for h in later if isinstance(h, PreemptionSeen)]
    assert not done.new and done.preemption.preemptor_tier(TIERS) == "critical"


def test_a_finished_or_deleted_kueue_workload_waits_no_more() -> None:
    st, job = pending_state()
    wl = next(i for i in load("kueue-shaped-job-pending")["items"] if i["kind"] == "Workload")
    assert len(evaluate(st, T0 + 60).workloads) == 1
    apply(st, wl, deleted=True)
    assert evaluate(st, T0 + 60).workloads == ()
    done = k.workload(job=job, queue="team", created=T0 + 1, finished=True, resource_version="9")
    apply(st, done)
    assert evaluate(st, T0 + 60).workloads == ()


def test_not_admitted_while_its_cohort_has_quota_free_is_stuck_despite_capacity() -> None:
    from tests.unit.domain.helpers import POLICY
    from watchtower.domain.stuck import stuck_heads

    st, _ = pending_state()
    now = T0 + 30 * 60
    # Its own queue is full: Kueue has reason to hold it.
    snap = evaluate(st, now)
    assert stuck_heads(snap, st, stuck_after=600, selector=POLICY.selector, last_bound={}) == ()
    # A queue of its cohort leaves 8 GPUs unused and its own may borrow them: nothing should hold it.
    apply(
        st,
        {**k.cluster_queue("team-cq", nominal_gpus=8, reserved_gpus=8, cohort="research", borrowing_limit=8)},
    )
    apply(st, k.cluster_queue("spare-cq", nominal_gpus=16, reserved_gpus=8, cohort="research"))
    snap = evaluate(st, now)
    (s,) = stuck_heads(snap, st, stuck_after=600, selector=POLICY.selector, last_bound={})
    assert (s.cluster_queue, s.quota_free, s.scheduler) == ("team-cq", 8, "kueue")
    assert "has 8 GPU(s) of nominal quota free for its 8, yet Kueue has not admitted it" in s.why
    assert stuck_heads(snap, st, stuck_after=3600, selector=POLICY.selector, last_bound={}) == ()
    d = workload_dict(snap.workloads[0], stuck=s)["stuck_despite_capacity"]
    assert (d["pod"], d["node"], d["cluster_queue"], d["quota_free_gpus"]) == (None, None, "team-cq", 8)


def test_a_held_job_is_ahead_of_no_pod_and_its_place_and_estimate_are_kueues() -> None:
    from watchtower.domain.estimate import TierWaits

    st, _ = pending_state()
    msg = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."
    apply(
        st,
        o.pod(
            name="eval-1",
            namespace=NS,
            created=T0 + 60,
            gpus=8,
            priority=1_000_000,
            priority_class="urgent-kueue",
            conditions=[o.unschedulable(T0 + 61, msg)],
        ),
    )
    name = k.workload_name("Job", "resnet", o.new_uid("job/resnet"))
    st.forms.kueue.set_positions(
        DECODER.pending_positions(raw(k.pending_workloads([(NS, name, "team", 1)]))), {"team-cq"}
    )
    held, pod = evaluate(st, T0 + 600).workloads  # the job first in the order: older, same tier
    assert (held.key, pod.key.name) == (JOB, "eval-1")
    assert (pod.ahead, pod.facts.position_queue, held.ahead, held.facts.position_queue) == (
        0,
        "scheduler",
        0,
        "kueue",
    )
    waits = TierWaits(T0 + 600, 6 * 3600, 1, {"critical": (900.0, 1200.0)})
    e = waits.estimate(held)
    assert e is not None and (e.position, e.start_in) == (None, None)
    assert e.text == "no estimate: held by Kueue (#1 in ClusterQueue team-cq): it starts once Kueue admits it"
    p = waits.estimate(pod)
    assert p is not None and p.position == 1
    from watchtower.domain.alerts.rules.base import queue_context

    assert (
        queue_context(held) == "Held by Kueue, not yet in the scheduler's queue: #1 in ClusterQueue team-cq."
    )
    assert queue_context(pod) == "Nothing is ahead of it in the queue."
