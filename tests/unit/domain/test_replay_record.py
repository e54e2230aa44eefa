"""The replay records derived from what the recorder sees (domain/replay_record.py): a workload arriving,
starting, preempted, waiting again, finishing or deleted; a node appearing, refreshed while it stays and no
longer sighted once gone; a workload without GPUs or without a tier skipped and counted once.

Real parts: decoded pods and nodes in a ClusterState, the real QueueEvaluator, Ticks as the tracker makes
them, read through `view_of` as the service reads them. The preemption is handed in as the Tick carries it
(the ledger's record), since making the scheduler's events is beside the point here.
"""

from __future__ import annotations

from dataclasses import replace

import msgspec
import pytest

from tests.unit.domain.helpers import POLICY, T0, apply, job_owner, pending_pod, running_pod
from watchtower.domain.change_log import ChangeCursor
from watchtower.domain.disruptions import Preemption
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.replay_record import (
    NODE_REFRESH,
    RECORD_EVERY,
    SKIP_NO_GPUS,
    SKIP_NO_TIER,
    ReplayRows,
    ReplayState,
    due,
    record_replay,
    state_from_store,
    view_of,
)
from watchtower.domain.state import ClusterState
from watchtower.domain.tick import Tick
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o

FULL = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."
TRAIN = WorkloadKey("vision", "Job", "train")


class Recorder:
    """`by_log`: each pass looks at the workloads the state's change log names since the last (as the
    service does); otherwise at every workload (a first pass, a restart)."""

    def __init__(self, *, by_log: bool = False) -> None:
        self.state = ClusterState()
        self.evaluator = QueueEvaluator(POLICY)
        self.recorded = ReplayState()
        self.cursor = ChangeCursor() if by_log else None

    def tick(self, at: float) -> Tick:
        snap = self.evaluator.evaluate(self.state, now=at)
        return Tick(at, snap, listed_facts=self.evaluator.order.facts)

    def record(self, at: float, **view: object) -> ReplayRows:
        touched = self.cursor.read(self.state.log) if self.cursor is not None else None
        v = view_of(self.tick(at), self.state, touched)
        if view:
            v = replace(v, **view)  # type: ignore[arg-type]
        return record_replay(v, self.recorded, POLICY.tiers, self.state.team_of)


def train_pending(**kw: object) -> dict[str, object]:
    return pending_pod(
        "train-0", message=FULL, gpus=8, cpu="16", memory="64Gi", owner=job_owner("train"), **kw
    )


@pytest.mark.parametrize("by_log", [False, True], ids=["every workload", "by the change log"])
def test_a_workload_arriving_starting_preempted_and_finishing(by_log: bool) -> None:
    r = Recorder(by_log=by_log)
    apply(r.state, o.node("gpu-1", gpus=8))
    apply(r.state, train_pending())
    out = r.record(T0 + 30)
    (w,) = out.workloads
    assert (w.key, w.team, w.tier, w.form, w.outcome) == (
        f"vision/Job/train@{T0:.0f}",
        r.state.team_of("vision"),
        "low",
        "pods",
        "waiting",
    )
    assert (w.pods, w.gpus_per_pod, w.cpu_millis_per_pod, w.memory_bytes_per_pod) == (
        1,
        8,
        16_000,
        64 * 2**30,
    )
    assert (w.arrived, w.started, w.ended) == (T0, None, None)

    assert r.record(T0 + 90).workloads == ()  # nothing changed: nothing written

    apply(r.state, running_pod("train-0", "gpu-1", gpus=8, cpu="16", memory="64Gi", owner=job_owner("train")))
    (w,) = r.record(T0 + 150).workloads
    assert (w.outcome, w.started) == ("running", T0 + 10)  # the pod's PodScheduled time, not the pass's

    # Preempted: its pod goes, the Job makes another that waits; the first start is kept.
    apply(r.state, running_pod("train-0", "gpu-1", gpus=8, owner=job_owner("train")), deleted=True)
    apply(r.state, train_pending(created=T0 + 200, uid="second"))
    hit = Preemption("u-train-0", "vision", "train-0", at=T0 + 195, victim_workload=TRAIN)
    (w,) = r.record(T0 + 240, preemptions=(hit,)).workloads
    assert (w.outcome, w.started, w.preempted, w.arrived) == ("waiting", T0 + 10, T0 + 195, T0)

    apply(
        r.state,
        running_pod(
            "train-0b", "gpu-1", gpus=8, created=T0 + 200, owner=job_owner("train"), phase="Succeeded"
        ),
    )
    apply(r.state, train_pending(created=T0 + 200, uid="second"), deleted=True)
    (w,) = r.record(T0 + 400).workloads
    assert (w.outcome, w.ended, w.started, w.preempted) == ("finished", T0 + 400, T0 + 10, T0 + 195)
    # Its completed pod is still listed: the ended workload is not looked at (nor written) again.
    assert r.record(T0 + 500).workloads == ()


@pytest.mark.parametrize("by_log", [False, True], ids=["every workload", "by the change log"])
def test_a_workload_deleted_while_waiting_ends_deleted(by_log: bool) -> None:
    r = Recorder(by_log=by_log)
    apply(r.state, train_pending())
    r.record(T0 + 30)
    apply(r.state, train_pending(), deleted=True)
    (w,) = r.record(T0 + 90).workloads
    assert (w.outcome, w.started, w.ended) == ("deleted", None, T0 + 90)


def test_a_node_appears_is_sighted_again_while_it_stays_and_keeps_its_last_sighting_when_gone() -> None:
    r = Recorder()
    apply(r.state, o.node("gpu-1", gpus=8, cpu="96", memory="768Gi"))
    (n,) = r.record(T0).nodes
    assert (n.name, n.gpus, n.cpu_millis, n.memory_bytes, n.first_seen, n.last_seen) == (
        "gpu-1", 8, 96_000, 768 * 2**30, T0, T0,
    )  # fmt: skip
    assert r.record(T0 + 60).nodes == ()  # unchanged, not due for a sighting
    (n,) = r.record(T0 + NODE_REFRESH).nodes
    assert (n.first_seen, n.last_seen) == (T0, T0 + NODE_REFRESH)
    r.state.delete_node("gpu-1")
    assert r.record(T0 + 2 * NODE_REFRESH).nodes == ()  # gone: its last sighting stays what was written
    assert "gpu-1" not in r.recorded.nodes


def test_a_workload_without_gpus_or_without_a_tier_is_skipped_and_counted_once() -> None:
    r = Recorder()
    apply(r.state, pending_pod("cpu-only", message=FULL, gpus=0))
    apply(r.state, train_pending())
    first = r.record(T0 + 30)
    assert dict(first.skipped) == {SKIP_NO_GPUS: 1}
    assert [w.name for w in first.workloads] == ["train"]
    assert dict(r.record(T0 + 90).skipped) == {}  # counted once while it is there

    # No tier to tell (facts a form could not place in one): skipped, counted, nothing written for it.
    r2 = Recorder()
    apply(r2.state, pending_pod("odd", message=FULL, gpus=2))
    tick = r2.tick(T0 + 30)
    facts = [msgspec.structs.replace(f, tier="") for f in tick.listed_facts]
    view = replace(view_of(tick, r2.state), facts=facts)
    out = record_replay(view, ReplayState(), POLICY.tiers, r2.state.team_of)
    assert (out.workloads, dict(out.skipped)) == ((), {SKIP_NO_TIER: 1})


def test_two_replicas_and_a_restart_write_the_same_rows() -> None:
    a, b = Recorder(), Recorder()
    for r in (a, b):
        apply(r.state, train_pending())
    first_a, first_b = a.record(T0 + 30), b.record(T0 + 31)
    assert [w.key for w in first_a.workloads] == [w.key for w in first_b.workloads]
    # A restart from the store's open rows keeps the workload's key and closes it when it is gone.
    restarted = Recorder()
    restarted.recorded = state_from_store(first_a.workloads, first_a.nodes)
    (w,) = restarted.record(T0 + 90).workloads
    assert (w.key, w.outcome) == (first_a.workloads[0].key, "deleted")


def test_a_pass_is_due_once_a_minute_of_cluster_time() -> None:
    s = ReplayState(last_pass=T0)
    assert due(ReplayState(), T0)
    assert not due(s, T0 + RECORD_EVERY - 1) and due(s, T0 + RECORD_EVERY)
