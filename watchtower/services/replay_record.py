"""The tick consumer that records what a replay of a past week needs (domain/replay_record.py): once a
minute of cluster time, the workloads whose record changed and the nodes new, changed or due for a sighting
are upserted in the store; rows older than the retention are pruned once a day.

Every replica may record, as with the fairness history: the rows are keyed by facts and merge by rule, so
two replicas (or a restart) leave the same rows.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

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
from watchtower.ports import ReplayRecordStore

log = logging.getLogger("watchtower.replay")

PRUNE_EVERY = 86400.0
WEEK = 7 * 86400.0


class ReplayRecorder:
    def __init__(
        self,
        *,
        store: ReplayRecordStore,
        view: Callable[[Tick], ClusterView],
        tiers: TierPolicy,
        team_of: Callable[[str], str],
        retention_weeks: int,
        start_empty: bool = False,
    ) -> None:
        self.store = store
        self.view = view
        self.tiers = tiers
        self.team_of = team_of
        self.retention = retention_weeks * WEEK
        # A recorder of another cluster's past (the demo's simulated week) starts from nothing.
        self.start_empty = start_empty
        self.skipped: dict[str, int] = {}  # reason -> workloads skipped since the start
        self._state: ReplayState | None = None
        self._pruned_at: float | None = None

    def _start(self) -> ReplayState:
        if self.start_empty:
            return ReplayState()
        return state_from_store(*self.store.replay_open())

    async def on_tick(self, tick: Tick) -> None:
        """Record what changed since the last pass, when one is due; the store is written off the loop."""
        if self._state is None:
            self._state = await asyncio.to_thread(self._start)
        if not due(self._state, tick.at):
            return
        # The view is read here, on the event loop, between the state's updates.
        state, rows = record_replay(self.view(tick), self._state, self.tiers, self.team_of)
        if not rows.empty:
            await asyncio.to_thread(self._write, rows)
        # Only once written: a failed write is tried again from the same previous state at the next pass.
        self._state = state
        self._count(rows)
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

    def _write(self, rows: ReplayRows) -> None:
        self.store.record_replay(rows.workloads, rows.nodes)
