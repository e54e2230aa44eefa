"""The tick consumer that records what a replay of a past week needs (domain/replay_record.py): once a
minute of cluster time, the workloads whose record changed and the nodes new, changed or due for a sighting
are upserted in the store; rows older than the retention are pruned once a day.

It reads the state's change log at every tick, gathering the workloads touched since its last pass, and
looks at those alone (every workload only at its first pass, or when the log was read from the start
again): on a cluster of 150,000 pods a pass costs a few milliseconds of the event loop, not a second.

Every replica may record, as with the fairness history: the rows are keyed by facts and merge by rule, so
two replicas (or a restart) leave the same rows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Set

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
WEEK = 7 * 86400.0


class ReplayRecorder:
    def __init__(
        self,
        *,
        store: ReplayRecordStore,
        view: Callable[[Tick, Set[WorkloadKey] | None], ClusterView],
        changes: Callable[[], Set[WorkloadKey] | None],
        tiers: TierPolicy,
        team_of: Callable[[str], str],
        retention_weeks: int,
        start_empty: bool = False,
    ) -> None:
        self.store = store
        self.view = view
        # The workloads touched since the last pass; None: look at every workload at the next one.
        self.changes = changes
        self._touched: set[WorkloadKey] | None = None
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
            self._touched = None
        elif self._touched is not None:
            self._touched |= got
        if self._state is None:
            self._state = await asyncio.to_thread(self._start)
        if not due(self._state, tick.at):
            return
        # The view is read here, on the event loop, between the state's updates.
        rows = record_replay(self.view(tick, self._touched), self._state, self.tiers, self.team_of)
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
