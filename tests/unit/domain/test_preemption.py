"""Preemptions and other disruptions: DESIGN §3 rules 6-8, replays (rule 12) and GPU-hours lost."""

from __future__ import annotations

import pytest

from tests.unit.domain.helpers import (
    DECODER,
    NS,
    T0,
    apply,
    evaluate,
    paddle_owner,
    pending_pod,
    raw,
    running_pod,
    state_of,
)
from watchtower.config import Settings
from watchtower.domain.state import DisruptionSeen, PreemptionSeen
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.ingest import Ingestor
from watchtower.simulator import objects as o

NODE = "gpu-7"
TIERS = Settings().tier_policy()
PREEMPTOR = pending_pod("urgent", uid="uid-urgent", priority=1_000_000, priority_class="urgent-debug")


def victim(**kw):
    """A training pod that ran two hours on 8 GPUs (startTime T0+11), preempted at T0+7211."""
    return running_pod(
        "train-worker-3",
        NODE,
        uid="uid-victim",
        gpus=8,
        priority=100_000,
        priority_class="batch",
        owner=paddle_owner("train"),
        **kw,
    )


def with_target(reason="PreemptionByScheduler", at=T0 + 7211.0, **kw):
    p = victim(deletion=at, **kw)
    p["status"]["conditions"].append(
        o.condition(
            "DisruptionTarget",
            "True",
            at,
            reason=reason,
            message="default-scheduler: preempting to accommodate a higher priority pod",
        )
    )
    return p


def preempted_event(message: str, at: float = T0 + 7212.0, related: bool = True):
    return o.scheduler_event(
        namespace=NS,
        reason="Preempted",
        note=message,
        regarding=o.pod_ref(victim()),
        at=at,
        related=o.pod_ref(PREEMPTOR) if related else None,
    )


@pytest.mark.parametrize("reason", ["PreemptionByScheduler", "PreemptionByKubeScheduler"])
def test_disruption_target_of_the_scheduler_is_a_preemption(reason):
    state = state_of(o.node(NODE), victim())
    out = apply(state, with_target(reason))
    assert [type(h) for h in out] == [PreemptionSeen]
    p = state.ledger.preemptions["uid-victim"]
    assert (p.node, p.victim_gpus, p.reason, p.victim_workload) == (
        NODE,
        8,
        reason,
        WorkloadKey(NS, "PaddleJob", "train"),
    )
    assert p.gpu_hours_lost == pytest.approx(8 * 7200 / 3600)


@pytest.mark.parametrize(
    "message",
    [
        f"Preempted by pod uid-urgent on node {NODE}",  # 1.26+
        f"Preempted by {NS}/urgent on node {NODE}",  # older
    ],
)
@pytest.mark.parametrize("event_first", [False, True])
def test_preempted_event_names_the_preemptor_before_or_after_the_condition(message, event_first):
    state = state_of(o.node(NODE), victim(), PREEMPTOR)
    steps = [preempted_event(message, related=False), with_target()]
    if event_first:
        out = apply(state, steps[0]) + apply(state, steps[1])
    else:
        out = apply(state, steps[1]) + apply(state, steps[0])
    assert [h.new for h in out if isinstance(h, PreemptionSeen)] == [True, False]
    assert len(state.ledger.preemptions) == 1
    p = state.ledger.preemptions["uid-victim"]
    # Either message names a pod the state holds: the record takes its whole identity and its tier.
    assert (p.preemptor_uid, p.preemptor_name, p.node) == ("uid-urgent", "urgent", NODE)
    assert (p.preemptor_priority, p.preemptor_priority_class) == (1_000_000, "urgent-debug")
    assert p.reason == "PreemptionByScheduler"  # the condition's reason wins over the event's
    assert p.at == T0 + 7211.0  # the eviction, not the later event
    assert p.gpu_hours_lost == pytest.approx(16.0)


def test_related_field_gives_the_preemptor_uid():
    state = state_of(o.node(NODE), victim(), PREEMPTOR, with_target())
    apply(state, preempted_event(f"Preempted by {NS}/urgent on node {NODE}"))
    p = state.ledger.preemptions["uid-victim"]
    assert (p.preemptor_uid, p.preemptor_namespace, p.preemptor_name) == ("uid-urgent", NS, "urgent")


def test_condition_read_from_the_final_deleted_object():
    state = state_of(o.node(NODE), victim())
    out = apply(state, with_target(), deleted=True)  # MODIFIED with the condition was never seen
    assert [type(h) for h in out] == [PreemptionSeen]
    assert "uid-victim" not in state.pods and "uid-victim" in state.ledger.preemptions
    assert state.gpus_used == {}


def test_event_after_the_pod_is_gone_still_attributes_the_preemptor():
    state = state_of(o.node(NODE), victim())
    apply(state, with_target(), deleted=True)
    apply(state, preempted_event(f"Preempted by pod uid-urgent on node {NODE}"))
    p = state.ledger.preemptions["uid-victim"]
    assert p.preemptor_uid == "uid-urgent" and p.victim_gpus == 8


def test_the_preemptor_tier_is_recorded_when_first_named_and_outlives_the_preemptor_pod():
    state = state_of(o.node(NODE), victim(), PREEMPTOR, with_target())
    apply(state, preempted_event(f"Preempted by pod uid-urgent on node {NODE}", related=False))
    apply(state, PREEMPTOR, deleted=True)  # the urgent job ran and is gone before anyone looks
    p = state.ledger.preemptions["uid-victim"]
    assert (p.preemptor_namespace, p.preemptor_name) == (NS, "urgent")
    assert p.preemptor_tier(TIERS) == "critical" and p.victim_tier(TIERS) == "low"


def test_a_preemptor_pod_seen_after_the_event_completes_the_record():
    # Events and pods come on separate watches: the event may name a pod not seen yet.
    state = state_of(o.node(NODE), victim(), with_target())
    apply(state, preempted_event(f"Preempted by pod uid-urgent on node {NODE}", related=False))
    assert state.ledger.preemptions["uid-victim"].preemptor_tier(TIERS) is None
    out = apply(state, PREEMPTOR)
    assert [(type(h), h.new) for h in out if isinstance(h, PreemptionSeen)] == [(PreemptionSeen, False)]
    p = state.ledger.preemptions["uid-victim"]
    assert (p.preemptor_name, p.preemptor_tier(TIERS)) == ("urgent", "critical")
    assert state.ledger.awaited_preemptors == {}
    assert apply(state, PREEMPTOR) == []  # seen once


def test_a_preemptor_never_seen_is_forgotten_with_its_record():
    state = state_of(o.node(NODE), victim(), with_target())
    apply(state, preempted_event(f"Preempted by pod uid-urgent on node {NODE}", related=False))
    assert set(state.ledger.awaited_preemptors) == {"uid-urgent"}
    state.prune(now=T0 + 7211.0 + 7 * 86400, keep_seconds=3600)
    assert state.ledger.preemptions == {} and state.ledger.awaited_preemptors == {}


def test_event_alone_for_an_unknown_pod_is_recorded_without_cost():
    state = state_of()
    apply(state, preempted_event(f"Preempted by pod uid-urgent on node {NODE}"))
    p = state.ledger.preemptions["uid-victim"]
    assert p.gpu_hours_lost is None and p.node == NODE


def test_replaying_the_same_objects_reports_nothing_twice():
    objs = [
        o.node(NODE),
        victim(),
        with_target(),
        preempted_event(f"Preempted by pod uid-urgent on node {NODE}"),
    ]
    state = state_of(*objs)
    before = dict(state.ledger.preemptions)
    for obj in objs:
        assert apply(state, obj) == []
    assert apply(state, with_target(), deleted=True) == []
    assert state.ledger.preemptions == before


def test_relist_replace_is_idempotent():
    state = state_of(o.node(NODE))
    from tests.unit.domain.helpers import pod

    pods = [pod(victim()), pod(pending_pod("p"))]
    ingest = Ingestor(state, DECODER)
    listed = [raw(victim()), raw(pending_pod("p"))]
    ingest.list_page("Pod", listed)
    assert ingest.list_page("Pod", listed) == []
    assert set(state.pods) == {"uid-victim", pods[1].uid}


@pytest.mark.parametrize(
    "reason", ["EvictionByEvictionAPI", "DeletionByTaintManager", "DeletionByPodGC", "TerminationByKubelet"]
)
def test_other_disruption_targets_are_not_preemptions(reason):
    state = state_of(o.node(NODE), victim())
    out = apply(state, with_target(reason))
    assert [type(h) for h in out] == [DisruptionSeen]
    assert state.ledger.preemptions == {}
    snap = evaluate(state, T0 + 7300)
    assert snap.preemptions == () and [d.reason for d in snap.disruptions] == [reason]
    assert apply(state, with_target(reason)) == []  # once


@pytest.mark.parametrize("status_reason", ["Evicted", "Preempting"])
def test_kubelet_evictions_are_not_preemptions(status_reason):
    state = state_of(o.node(NODE), victim())
    apply(state, victim(phase="Failed", status_reason=status_reason))
    assert state.ledger.preemptions == {}
    assert [d.reason for d in state.ledger.disruptions.values()] == [status_reason]


def test_unrelated_events_do_not_make_preemptions():
    state = state_of(o.node(NODE), victim())
    ev = o.core_event(
        namespace=NS,
        reason="Killing",
        message="Stopping container main",
        involved=o.pod_ref(victim()),
        at=T0 + 7211,
        component="kubelet",
    )
    assert apply(state, ev) == []
    assert state.ledger.preemptions == {}


def test_repeated_preemption_of_a_workload_is_counted_per_window():
    owner = paddle_owner("train")
    state = state_of(o.node(NODE))
    for i, at in enumerate([T0 + 100, T0 + 1000, T0 + 2000]):
        v = running_pod(f"train-worker-{i}", NODE, uid=f"v{i}", owner=owner, deletion=at)
        v["status"]["conditions"].append(
            o.condition("DisruptionTarget", "True", at, reason="PreemptionByScheduler")
        )
        apply(state, v, deleted=True)
    apply(
        state,
        pending_pod(
            "train-worker-0",
            uid="again",
            owner=owner,
            message="0/1 nodes are available: 1 Insufficient nvidia.com/gpu.",
        ),
    )
    w = evaluate(state, T0 + 2100).by_key(WorkloadKey(NS, "PaddleJob", "train"))
    assert w.preemptions_recent == 3
    w = evaluate(state, T0 + 3800).by_key(WorkloadKey(NS, "PaddleJob", "train"))
    assert w.preemptions_recent == 2  # the first fell out of the hour


def test_a_gang_preempted_at_once_counts_once():
    owner = paddle_owner("train")
    state = state_of(o.node(NODE))
    for i in range(4):
        v = running_pod(f"train-worker-{i}", NODE, uid=f"v{i}", owner=owner, deletion=T0 + 100)
        v["status"]["conditions"].append(
            o.condition("DisruptionTarget", "True", T0 + 100, reason="PreemptionByScheduler")
        )
        apply(state, v, deleted=True)
    apply(state, pending_pod("train-worker-0", uid="again", owner=owner))
    assert evaluate(state, T0 + 200).by_key(WorkloadKey(NS, "PaddleJob", "train")).preemptions_recent == 1
