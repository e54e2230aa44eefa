"""A 1.36 gang preempting as a whole, read from what the real scheduler wrote (k8s-gang-preemption.json).

With workload-aware preemption the scheduler evicts for the PodGroup, not for a pod: its pods say only
"preemption: not eligible due to workload aware preemption enabled", no pod is nominated, and the
victims' `Preempted` events name the PodGroup ("Preempted by podgroup <uid> on node cluster").
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures import FIXTURES
from tests.unit.domain.helpers import DECODER, POLICY, TIERS, apply, raw
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue import QueueEvaluator, WorkloadState
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey

CAPTURE = FIXTURES / "real" / "k8s-gang-preemption.json"
GANG = WorkloadKey("e2e-gang-preempt-crit", "PodGroup", "urgent")


def items(kind: str) -> list[dict[str, Any]]:
    return [i for i in json.loads(CAPTURE.read_text())["items"] if i["kind"] == kind]


def victims() -> list[dict[str, Any]]:
    return [p for p in items("Pod") if p["metadata"]["name"].startswith("filler-")]


def put_group(state: ClusterState) -> None:
    (group,) = items("PodGroup")
    state.forms.gangs.upsert_pod_group(DECODER.decode("PodGroup", raw(group)))


def gang_status(state: ClusterState, now: float) -> Any:
    snap = QueueEvaluator(POLICY).evaluate(state, now=now)
    (w,) = [w for w in snap.waiting() if w.key == GANG]
    return w


def now_of() -> float:
    (group,) = items("PodGroup")
    return DECODER.decode("PodGroup", raw(group)).created + 120


@pytest.mark.parametrize("group_first", [True, False])
def test_victims_are_the_podgroups_and_its_preemption_is_under_way(group_first: bool) -> None:
    state = ClusterState()
    if group_first:
        put_group(state)
    for obj in (*items("Pod"), *items("Event")):
        apply(state, obj)
    if not group_first:
        put_group(state)  # the events came before the PodGroup: attributed when it arrives

    recs = sorted(state.ledger.preemptions.values(), key=lambda p: p.victim_name)
    assert [p.victim_name for p in recs] == ["filler-0", "filler-1", "filler-2", "filler-3"]
    by_name = {v["metadata"]["name"]: v for v in victims()}
    for p in recs:
        assert (p.preemptor_kind, p.preemptor_namespace, p.preemptor_name) == ("PodGroup", *GANG[::2])
        assert p.preemptor_tier(TIERS) == "critical"  # the PodGroup's own priority, 1,000,000
        assert p.victim_tier(TIERS) == "low"
        assert p.node == by_name[p.victim_name]["spec"]["nodeName"]  # "on node cluster" names no node
    assert not state.ledger.awaited_preemptors  # no pod is awaited for a PodGroup's uid

    w = gang_status(state, now_of())
    assert w.state is WorkloadState.PENDING
    assert w.preemption is PreemptionVerdict.POSSIBLE
    assert w.why == "no node fits (2 tried): 2 nodes lack 4 free GPUs; preemption is under way"


def test_once_its_victims_are_gone_the_gang_no_longer_says_preemption_is_under_way() -> None:
    state = ClusterState()
    put_group(state)
    for obj in (*items("Pod"), *items("Event")):
        apply(state, obj)
    evaluator = QueueEvaluator(POLICY)
    now = now_of()
    (w,) = [w for w in evaluator.evaluate(state, now=now).waiting() if w.key == GANG]
    assert w.preemption is PreemptionVerdict.POSSIBLE
    for v in victims():
        apply(state, v, deleted=True)
    # The same evaluator, incrementally: the victims' deletion must reach the preemptor's status.
    (w,) = [w for w in evaluator.evaluate(state, now=now + 1).waiting() if w.key == GANG]
    assert w.preemption is PreemptionVerdict.UNKNOWN
    assert "preemption is under way" not in w.why
    assert not state.ledger.group_victims


def test_the_bare_podgroup_messages_are_read_as_the_gang_not_fitting() -> None:
    from watchtower.domain.messages.scheduler import explain, parse_scheduling_message

    for msg in (
        "pod group is unschedulable",
        # Volcano's pods (tests/fixtures/real/volcano-real-podgroup-pending.json, a real vc-scheduler)
        "pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable",
    ):
        d = parse_scheduling_message(msg)
        assert d.recognised and [r.reason for r in d.reasons] == ["gang cannot be placed"], msg
    volcano = parse_scheduling_message(
        "pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable"
    )
    assert explain(volcano) == (
        "its gang cannot be placed: the scheduler cannot fit the minimum of 4 pods together (only 0 placed)"
    )
