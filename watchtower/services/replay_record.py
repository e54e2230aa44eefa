"""The tick consumer that records what a replay of a past week needs (domain/replay_record.py): once a
minute of cluster time, the workloads whose record changed and the nodes new, changed or due for a sighting
are upserted in the store; rows older than the retention are pruned once a day.

It reads the state's change log at every tick, gathering the workloads touched since its last pass, and
looks at those alone. Every workload is looked at after a start (or when the log was read from the start
again), BACKLOG_CHUNK of them at each tick until all were, so no tick pays for the whole cluster at once.

Every replica may record, as with the fairness history: the rows are keyed by facts and merge by rule, so
two replicas (or a restart) leave the same rows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Set

from watchtower.domain.replay_record import (
    SKIP_NO_GPUS,
    ClusterView,
    ReplayRows,
    ReplayState,
    due,
    record_replay,
    state_from_store,
)
from watchtower.domain.tick import Tick
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import ReplayRecordStore

log = logging.getLogger("watchtower.replay")

PRUNE_EVERY = 86400.0
# Workloads of the backlog looked at per tick: about a tick's time on the event loop (bench/replay_record.py).
BACKLOG_CHUNK = 2000
WEEK = 7 * 86400.0


class ReplayRecorder:
    def __init__(
        self,
        *,
        store: ReplayRecordStore,
        view: Callable[[Tick, Set[WorkloadKey] | None], ClusterView],
        changes: Callable[[], Set[WorkloadKey] | None],
        workloads: Callable[[], Iterable[WorkloadKey]],
        tiers: TierPolicy,
        team_of: Callable[[str], str],
        retention_weeks: int,
        start_empty: bool = False,
    ) -> None:
        self.store = store
        self.view = view
        # The workloads touched since the last pass (`changes` reads the state's change log; None: the log
        # was read from the start again, every workload is to be looked at).
        self.changes = changes
        self.workloads = workloads  # every workload with pods in the state
        self._touched: set[WorkloadKey] = set()
        # Every workload still to be looked at after a start (or a log read from the start again): a few
        # thousand at each tick until none is left, so no tick waits for the whole cluster at once.
        self._backlog: list[WorkloadKey] | None = None
        self.tiers = tiers
        self.team_of = team_of
        self.retention = retention_weeks * WEEK
        # A recorder of another cluster's past (the demo's simulated week) starts from nothing.
        self.start_empty = start_empty
        self.skipped: dict[str, int] = {}  # reason -> workloads skipped since the start
        self._state: ReplayState | None = None
        self._unwritten: list[ReplayRows] = []
        self._pruned_at: float | None = None

    def _start(self) -> ReplayState:
        if self.start_empty:
            return ReplayState()
        return state_from_store(*self.store.replay_open())

    async def on_tick(self, tick: Tick) -> None:
        """Record what changed since the last pass, when one is due; the store is written off the loop."""
        got = self.changes()  # at every tick, so that the log keeps only what was not read
        if got is None:
            self._backlog = None
        else:
            self._touched |= got
        if self._state is None:
            self._state = await asyncio.to_thread(self._start)
        state = self._state
        if self._backlog is None:
            st = self._state
            listed = tick.listed_facts or [w.facts for w in tick.snapshot.workloads]
            every = set(self.workloads()).union(f.key for f in listed)
            every |= st.open.keys() | st.seen.keys() | st.closed | st.skipped
            self._backlog = list(every)  # taken from the end
        elif not self._backlog and not due(state, tick.at):
            return
        chunk = self._backlog[-BACKLOG_CHUNK:]
        del self._backlog[-BACKLOG_CHUNK:]
        # The view is read here, on the event loop, between the state's updates.
        touched = self._touched.union(chunk)
        rows = record_replay(self.view(tick, touched), state, self.tiers, self.team_of)
        self._touched = set()
        self._count(rows)
        if not rows.empty:
            self._unwritten.append(rows)
        if self._unwritten:
            # The state has moved on: rows a failed write left are written with the next ones (the
            # upserts merge, so writing a row twice changes nothing).
            pending = list(self._unwritten)
            await asyncio.to_thread(self._write, pending)
            del self._unwritten[: len(pending)]
        if self._pruned_at is None or tick.at - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = tick.at
            removed = await asyncio.to_thread(self.store.prune_replay, tick.at - self.retention)
            if removed:
                log.info(
                    "replay records pruned: %d rows older than %d weeks", removed, self.retention // WEEK
                )

    def _count(self, rows: ReplayRows) -> None:
        for reason, n in rows.skipped.items():
            self.skipped[reason] = self.skipped.get(reason, 0) + n
            # Pods without GPUs are most of a cluster's pods: counted, not worth a line each pass.
            (log.debug if reason == SKIP_NO_GPUS else log.warning)(
                "replay records: %d workloads skipped (%s), %d since the start",
                n,
                reason,
                self.skipped[reason],
            )

    def _write(self, pending: list[ReplayRows]) -> None:
        self.store.record_replay(
            [w for r in pending for w in r.workloads], [n for r in pending for n in r.nodes]
        )
