"""The replay recorder as the service runs it: after a start it looks at every workload a chunk per tick
(no tick pays for the whole cluster), then once a minute at those the state's change log names; what it
writes lands in a real SQLite store and a restart carries on from the store's open rows.

Real parts: decoded pods in a ClusterState, the real QueueEvaluator, the SQLite history, the change log's
cursor registered as bootstrap registers it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.domain.helpers import POLICY, T0, apply, job_owner, pending_pod, running_pod
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.domain.change_log import ChangeCursor
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.replay_record import view_of
from watchtower.domain.state import ClusterState
from watchtower.domain.tick import Tick
from watchtower.services import replay_record
from watchtower.services.replay_record import ReplayRecorder

FULL = "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


class Cluster:
    def __init__(self, store: SQLiteFairnessHistory) -> None:
        self.state = ClusterState()
        self.evaluator = QueueEvaluator(POLICY)
        self.cursor = ChangeCursor()
        st = self.state
        self.recorder = ReplayRecorder(
            store=store,
            view=lambda tick, touched: view_of(tick, st, touched),
            changes=lambda: self.cursor.read(st.log),
            workloads=lambda: st.by_workload.keys(),
            tiers=POLICY.tiers,
            team_of=st.team_of,
            retention_weeks=8,
        )

    async def tick(self, at: float) -> None:
        snap = self.evaluator.evaluate(self.state, now=at)
        await self.recorder.on_tick(Tick(at, snap, listed_facts=self.evaluator.order.facts))


def names(store: SQLiteFairnessHistory) -> list[str]:
    return sorted(w.name for w in store.replay_workloads(0, 1e12))


async def test_the_first_look_at_every_workload_is_spread_over_ticks_then_only_changes_are_looked_at(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(replay_record, "BACKLOG_CHUNK", 4)
    store = SQLiteFairnessHistory(tmp_path / "state.db")
    c = Cluster(store)
    for i in range(10):
        apply(c.state, pending_pod(f"job-{i}", message=FULL, gpus=2, owner=job_owner(f"job-{i}")))
    await c.tick(T0 + 10)
    assert len(names(store)) == 4
    await c.tick(T0 + 20)  # the backlog goes on at every tick, due or not
    await c.tick(T0 + 30)
    assert names(store) == sorted(f"job-{i}" for i in range(10))

    apply(c.state, running_pod("job-3", "gpu-1", gpus=2, owner=job_owner("job-3")))
    await c.tick(T0 + 40)  # not due: a minute after the last pass
    assert {w.name: w.outcome for w in store.replay_workloads(0, 1e12)}["job-3"] == "waiting"
    await c.tick(T0 + 95)
    (w,) = [w for w in store.replay_workloads(0, 1e12) if w.name == "job-3"]
    assert (w.outcome, w.started) == ("running", T0 + 10)

    # A restart: the new recorder starts from the store's open rows and looks at everything again; a
    # workload deleted while it was down is closed, the others keep their rows and first starts.
    apply(c.state, pending_pod("job-0", message=FULL, gpus=2, owner=job_owner("job-0")), deleted=True)
    again = Cluster(store)
    again.state = c.state
    again.evaluator = c.evaluator
    st = c.state
    again.recorder.view = lambda tick, touched: view_of(tick, st, touched)
    again.recorder.workloads = lambda: st.by_workload.keys()
    again.recorder.changes = lambda: again.cursor.read(st.log)
    for at in (T0 + 200, T0 + 210, T0 + 220):
        await again.tick(at)
    rows = {w.name: w for w in store.replay_workloads(0, 1e12)}
    assert len(rows) == 10 and rows["job-0"].outcome == "deleted"
    assert rows["job-0"].ended in (T0 + 200, T0 + 210, T0 + 220)  # at the tick its chunk came up
    assert rows["job-3"].started == T0 + 10
    store.close()
