"""The tick consumer that keeps the fairness history: each Tick's difference against the last one recorded
(domain/fairness/record.py) is upserted in the store, a heartbeat row marks each minute recorded, and old
history is pruned once a day.

Every replica may record: the rows are keyed by the facts, so two replicas (or a restart) write the same
rows, and a closed episode is never reopened by a replica a tick behind.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from watchtower.domain.fairness.record import (
    RecordedState,
    RecordPolicy,
    TickRecords,
    record_tick,
    state_from_store,
)
from watchtower.domain.tick import Tick
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import FairnessHistory

log = logging.getLogger("watchtower.fairness")

PRUNE_EVERY = 86400.0
WEEK = 7 * 86400.0


class FairnessRecorder:
    def __init__(
        self,
        *,
        history: FairnessHistory,
        policy: RecordPolicy,
        present: Callable[[WorkloadKey], bool],
        retention_weeks: int,
        start_empty: bool = False,
    ) -> None:
        self.history = history
        # A recorder of another cluster's past (the demo's simulated week) starts from nothing: the store's
        # open waits are the live cluster's, not its own.
        self.start_empty = start_empty
        self.policy = policy
        self.present = present
        self.retention = retention_weeks * WEEK
        self._state: RecordedState | None = None
        self._pruned_at: float | None = None

    def _start(self) -> RecordedState:
        if self.start_empty:
            return RecordedState()
        episodes, incidents = self.history.open_waits()
        return state_from_store(episodes, incidents)

    async def on_tick(self, tick: Tick) -> None:
        """Record what `tick` changed; the store is written off the event loop, and only when it changed."""
        if self._state is None:
            self._state = await asyncio.to_thread(self._start)
        state, records = record_tick(tick, self._state, self.policy, present=self.present)
        if not records.empty:
            await asyncio.to_thread(self._write, records)
        # Only once written: a failed write is tried again from the same previous state at the next tick.
        self._state = state
        if self._pruned_at is None or tick.at - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = tick.at
            removed = await asyncio.to_thread(self.history.prune_history, tick.at - self.retention)
            if removed:
                log.info(
                    "fairness history pruned: %d rows older than %d weeks", removed, self.retention // WEEK
                )

    def _write(self, r: TickRecords) -> None:
        self.history.record(r.episodes, r.preemptions, r.incidents, heartbeats=r.heartbeats)
