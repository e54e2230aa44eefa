"""The fairness recorder by difference: after churn only the workloads the queue's order took out or put in
are looked at, yet every change a user reads in the history is still recorded (an episode opened, closed,
its tier or GPUs changed, one left open at shutdown), nothing is written when nothing changed, and a tick
that misses the change chain (a restart, an unrecorded tick) records the same as one that follows it.

Real parts: decoded pods in a ClusterState, the real QueueEvaluator, Ticks made as the QueueTracker makes them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest

from tests.unit.domain.helpers import POLICY, T0, apply, pending_pod, running_pod
from watchtower.domain.fairness.record import RecordedState, RecordPolicy, TickRecords, record_tick
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.state import ClusterState
from watchtower.domain.tick import Tick


class Recording:
    """A state, its evaluator, and the recorder's state carried from tick to tick."""

    def __init__(self, n: int = 50) -> None:
        self.state = ClusterState()
        self.evaluator = QueueEvaluator(POLICY)
        self.policy = RecordPolicy(tiers=POLICY.tiers, gang_stall_after=3600.0, team_of=self.state.team_of)
        self.recorded = RecordedState()
        for i in range(n):
            apply(
                self.state,
                pending_pod(f"p-{i}", message="0/2 nodes are available: 2 Insufficient nvidia.com/gpu."),
            )

    def tick(self, at: float, *, chained: bool = True) -> Tick:
        snap = self.evaluator.evaluate(self.state, now=at)
        order = self.evaluator.order
        return Tick(at, snap, listed_facts=order.facts, facts_change=order.last_change() if chained else None)

    def record(self, tick: Tick) -> TickRecords:
        self.recorded, out = record_tick(tick, self.recorded, self.policy, present=self.present)
        return out

    def present(self, k: object) -> bool:
        return k in self.state.by_workload


@pytest.fixture
def rec() -> Iterator[Recording]:
    r = Recording()
    r.record(r.tick(T0 + 5))
    yield r


def by_name(out: TickRecords) -> dict[str, tuple[str, int, str, float | None]]:
    return {e.workload: (e.outcome, e.gpus, e.tier, e.ended) for e in out.episodes}


def test_an_unchanged_tick_writes_nothing(rec: Recording) -> None:
    out = rec.record(rec.tick(T0 + 6))  # same minute: no heartbeat either
    assert out.empty


def test_a_new_wait_is_opened_and_only_it_is_written(rec: Recording) -> None:
    apply(rec.state, pending_pod("late", created=T0 + 10, gpus=4))
    out = rec.record(rec.tick(T0 + 20))
    assert by_name(out) == {"Pod/late": ("waiting", 4, "low", None)}


def test_a_placed_and_a_deleted_workload_close_their_episodes(rec: Recording) -> None:
    apply(rec.state, running_pod("p-1", "gpu-1"))
    apply(rec.state, pending_pod("p-2"), deleted=True)
    out = rec.record(rec.tick(T0 + 30))
    assert by_name(out) == {
        "Pod/p-1": ("scheduled", 1, "low", T0 + 30),
        "Pod/p-2": ("gone", 1, "low", T0 + 30),
    }


def test_a_change_of_gpus_or_tier_rewrites_that_episode_only(rec: Recording) -> None:
    msg = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    apply(rec.state, pending_pod("p-3", message=msg, gpus=8))
    apply(rec.state, pending_pod("p-4", message=msg, priority=1_000_000, priority_class="urgent-debug"))
    out = rec.record(rec.tick(T0 + 40))
    got = by_name(out)
    assert set(got) == {"Pod/p-3", "Pod/p-4"}
    assert got["Pod/p-3"][:2] == ("waiting", 8)
    assert got["Pod/p-4"][2] != "low"


def test_a_wait_open_at_shutdown_stays_open_with_its_last_change(rec: Recording) -> None:
    apply(rec.state, pending_pod("p-5", message="x", gpus=2))
    out = rec.record(rec.tick(T0 + 50))
    # The last tick before the service stops: the episode is written as still waiting (censored in the
    # week's report), with what changed, never closed for the stop.
    assert by_name(out) == {"Pod/p-5": ("waiting", 2, "low", None)}


def test_a_tick_off_the_change_chain_records_the_same_as_one_on_it(rec: Recording) -> None:
    twin = Recording()
    twin.record(twin.tick(T0 + 5))
    for r in (rec, twin):
        apply(r.state, running_pod("p-6", "gpu-1"))
        apply(r.state, pending_pod("p-7", message="x", gpus=3))
    chained = rec.record(rec.tick(T0 + 70))
    full = twin.record(twin.tick(T0 + 70, chained=False))
    assert (
        by_name(chained)
        == by_name(full)
        == {
            "Pod/p-6": ("scheduled", 1, "low", T0 + 70),
            "Pod/p-7": ("waiting", 3, "low", None),
        }
    )
    assert chained.heartbeats == full.heartbeats


def test_an_empty_queue_after_a_restart_closes_what_the_store_had_open(rec: Recording) -> None:
    open_ = rec.recorded.open
    for i in range(50):
        apply(rec.state, pending_pod(f"p-{i}"), deleted=True)
    restarted = Recording(n=0)
    restarted.state = rec.state
    restarted.recorded = RecordedState(open={k: replace(w, facts=None) for k, w in open_.items()})
    out = restarted.record(restarted.tick(T0 + 90))
    assert len(out.episodes) == 50 and {e.outcome for e in out.episodes} == {"gone"}
