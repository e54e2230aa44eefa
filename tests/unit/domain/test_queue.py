"""Pending pods and workloads: DESIGN §3 rules 1-4, 8, 10 and the capacity they hold."""

from __future__ import annotations

from tests.unit.domain.helpers import (
    GPU_FULL,
    NS,
    T0,
    apply,
    evaluate,
    paddle_owner,
    pending_pod,
    pod,
    running_pod,
    state_of,
)
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue import WorkloadState
from watchtower.domain.state import PodScheduled, PodStarted
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o


def test_a_recreated_pod_with_the_same_name_is_a_new_pod_keyed_by_uid():
    first = pending_pod("train-worker-0", uid="uid-1", owner=paddle_owner("train"), message=GPU_FULL)
    again = pending_pod(
        "train-worker-0", uid="uid-2", created=T0 + 600, owner=paddle_owner("train"), message=GPU_FULL
    )
    state = state_of(first)
    state.delete_pod("uid-1", pod(first))
    apply(state, again)
    assert set(state.pods) == {"uid-2"}
    w = evaluate(state, T0 + 900).by_key(WorkloadKey(NS, "PaddleJob", "train"))
    assert w is not None
    assert w.wait_seconds == 300  # since the new pod's creation, not the old one's
    assert w.pods_pending == 1


def test_both_pods_of_a_reused_name_are_tracked_while_both_exist():
    old = running_pod("train-worker-0", "gpu-1", uid="uid-1", owner=paddle_owner("train"), deletion=T0 + 500)
    new = pending_pod("train-worker-0", uid="uid-2", created=T0 + 500, owner=paddle_owner("train"))
    state = state_of(o.node("gpu-1"), old, new)
    assert set(state.pods) == {"uid-1", "uid-2"}
    assert state.gpus_used == {"gpu-1": 1}


def test_wait_counts_from_creation_timestamp():
    state = state_of(pending_pod("p", created=T0, message=GPU_FULL))
    assert evaluate(state, T0 + 3600).by_key(WorkloadKey(NS, "Pod", "p")).wait_seconds == 3600


def test_unschedulable_since_keeps_its_first_transition_while_the_message_changes():
    first = pending_pod("p", message="0/4 nodes are available: 4 Insufficient cpu.")
    state = state_of(first)
    later = o.pod(
        name="p",
        namespace=NS,
        created=T0,
        conditions=[o.unschedulable(T0 + 1, GPU_FULL)],  # the scheduler keeps lastTransitionTime
    )
    apply(state, later)
    p = next(iter(state.pods.values()))
    assert p.scheduled is not None
    assert p.scheduled.since == T0 + 1
    w = evaluate(state, T0 + 100).by_key(WorkloadKey(NS, "Pod", "p"))
    assert w.wait_seconds == 100
    assert w.diagnosis is not None and w.diagnosis.nodes_with("Insufficient nvidia.com/gpu") == 4


def test_binding_reports_wait_and_start_once_each():
    state = state_of(pending_pod("p", message=GPU_FULL))
    bound = running_pod("p", "gpu-1")
    out = apply(state, bound)
    assert [type(h) for h in out] == [PodScheduled, PodStarted]
    scheduled, started = out
    assert scheduled.wait == 10 and started.latency == 60
    assert apply(state, bound) == []  # the same object again reports nothing


def test_gated_pods_are_counted_as_gated_and_wait():
    # Issue 30: a gate is a hold, not "not queued" (DESIGN fact 4): the pod waits from its creation,
    # attributed to Kueue, and is alerted at its tier's thresholds.
    gated = o.pod(
        name="g",
        namespace=NS,
        created=T0,
        scheduling_gates=["kueue.x-k8s.io/admission"],
        conditions=[
            o.condition(
                "PodScheduled",
                "False",
                T0,
                reason="SchedulingGated",
                message="Scheduling is blocked due to non-empty scheduling gates",
            )
        ],
    )
    snap = evaluate(state_of(gated), T0 + 86400, include_running=True)
    w = snap.by_key(WorkloadKey(NS, "Pod", "g"))
    assert w.state is WorkloadState.PENDING
    assert w.waiting and w.severity == "critical" and w.wait_seconds == 86400
    assert w.why == "held by Kueue: no Kueue Workload for it seen yet"
    assert snap.gated_pods == 1 and w.pods_gated == 1
    assert snap.waiting() == [w]


def test_a_pending_pod_past_its_tier_threshold_is_critical():
    p = pending_pod("p", priority=1_000_000, priority_class="urgent-debug", message=GPU_FULL)
    w = evaluate(state_of(p), T0 + 16 * 60).by_key(WorkloadKey(NS, "Pod", "p"))
    assert (w.tier, w.severity) == ("critical", "critical")
    w = evaluate(state_of(p), T0 + 6 * 60).by_key(WorkloadKey(NS, "Pod", "p"))
    assert w.severity == "warning"


def test_preemption_verdict_comes_from_the_pod_when_it_knows_better():
    never = pending_pod("never", preemption_policy="Never", message=GPU_FULL)
    nominated = pending_pod("nom", nominated_node="gpu-1", message=GPU_FULL)
    plain = pending_pod("plain", message=GPU_FULL)
    snap = evaluate(state_of(never, nominated, plain), T0 + 60)
    verdict = {w.name: w.preemption for w in snap.workloads}
    assert verdict == {
        "never": PreemptionVerdict.POLICY_NEVER,
        "nom": PreemptionVerdict.POSSIBLE,
        "plain": PreemptionVerdict.NO_VICTIMS,
    }


def test_nominated_node_alone_records_no_preemption():
    state = state_of(o.node("gpu-1"), pending_pod("nom", nominated_node="gpu-1", message=GPU_FULL))
    assert state.ledger.preemptions == {}
    assert evaluate(state, T0 + 60).preemptions == ()


def test_partial_gang_holds_gpus_while_it_waits():
    owner = paddle_owner("llm")
    objs = [o.node("gpu-1"), o.node("gpu-2")]
    objs += [running_pod(f"llm-worker-{i}", "gpu-1", gpus=4, owner=owner) for i in range(2)]
    objs += [pending_pod(f"llm-worker-{i}", gpus=4, owner=owner, message=GPU_FULL) for i in range(2, 4)]
    w = evaluate(state_of(*objs), T0 + 60).by_key(WorkloadKey(NS, "PaddleJob", "llm"))
    assert w.state is WorkloadState.PARTIAL and w.gang
    assert (w.gpus_held, w.pods_running, w.pods_pending, w.gpus_requested) == (8, 2, 2, 16)
    assert "gang partly placed" in w.why


def test_terminating_pod_still_holds_its_gpus():
    victim = running_pod("old", "gpu-1", gpus=8, deletion=T0 + 100)
    state = state_of(o.node("gpu-1"), o.node("gpu-2", gpus=4), victim)
    cap = evaluate(state, T0 + 120).capacity
    assert (cap.allocatable, cap.used, cap.free_total, cap.largest_free) == (12, 8, 4, 4)
    # Finished pods give their GPUs back.
    apply(state, running_pod("old", "gpu-1", gpus=8, phase="Succeeded"))
    assert evaluate(state, T0 + 120).capacity.free_total == 12


def test_fragmentation_when_free_gpus_add_up_but_no_node_has_them():
    objs = [o.node(f"gpu-{i}") for i in range(3)]
    objs += [running_pod(f"r{i}", f"gpu-{i}", gpus=5) for i in range(3)]  # 3 free on each: 9 in all
    objs.append(pending_pod("big", gpus=8, message=GPU_FULL))
    objs.append(pending_pod("small", gpus=2, message=GPU_FULL))
    snap = evaluate(state_of(*objs), T0 + 60)
    assert [
        (f.key.name, f.gpus_requested, f.free_gpus_total, f.largest_free_on_one_node)
        for f in snap.fragmentation
    ] == [("big", 8, 9, 3)]


def test_cordoned_node_offers_no_free_gpus():
    state = state_of(o.node("gpu-1", unschedulable_=True), o.node("gpu-2", gpus=2))
    cap = evaluate(state, T0).capacity
    assert (cap.allocatable, cap.free_total) == (10, 2)


def test_running_workloads_are_listed_only_when_asked():
    state = state_of(o.node("gpu-1"), running_pod("r", "gpu-1"), pending_pod("p", message=GPU_FULL))
    assert [w.name for w in evaluate(state, T0 + 60).workloads] == ["p"]
    snap = evaluate(state, T0 + 60, include_running=True)
    assert {w.name: w.state for w in snap.workloads} == {
        "p": WorkloadState.PENDING,
        "r": WorkloadState.RUNNING,
    }
    assert snap.by_key(WorkloadKey(NS, "Pod", "r")).wait_seconds == 0


def test_non_gpu_pods_are_not_training_workloads_by_default():
    state = state_of(pending_pod("web", gpus=0, message="0/4 nodes are available: 4 Insufficient cpu."))
    assert evaluate(state, T0 + 60).workloads == ()


def test_queue_positions_follow_priority_then_age():
    objs = [
        pending_pod("low-old", created=T0, priority=100_000, message=GPU_FULL),
        pending_pod("crit", created=T0 + 50, priority=1_000_000, message=GPU_FULL),
        pending_pod("low-new", created=T0 + 10, priority=100_000, message=GPU_FULL),
    ]
    snap = evaluate(state_of(*objs), T0 + 60)
    ahead = {w.name: (w.ahead, w.ahead_higher_tier) for w in snap.workloads}
    assert ahead == {"crit": (0, 0), "low-old": (1, 1), "low-new": (2, 1)}


def test_team_is_the_namespace_label_else_the_namespace():
    state = state_of(
        o.namespace(NS, team="perception"),
        pending_pod("a", message=GPU_FULL),
        pending_pod("b", ns="nlp", message=GPU_FULL),
    )
    teams = {w.namespace: w.team for w in evaluate(state, T0 + 60).workloads}
    assert teams == {NS: "perception", "nlp": "nlp"}


def test_display_annotation_of_the_oldest_pod_is_shown():
    state = state_of(
        pending_pod("p", message=GPU_FULL, annotations={"watchtower.io/note": "ask @ana", "x": "y"})
    )
    assert evaluate(state, T0 + 1).workloads[0].annotations == {"watchtower.io/note": "ask @ana"}
