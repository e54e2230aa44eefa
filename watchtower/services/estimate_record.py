"""The tick consumer that checks the start estimates (issue 33): each wait's first estimate with a number is
upserted in the store, its start (or its going away) when a tick sees it; each checked estimate is counted
in `/metrics`; every few minutes the last week's checked estimates are read back into each tier's figures,
which the next ticks' estimates carry (their range and "within ±50 % for 7 in 10 workloads last week").
"Last week" is, in the service, from the start of the last complete ISO week (`fairness.timezone`) until
now: 7 to 14 days, never less than the week the weekly report's line is about.

Every replica may record, as with the fairness history: the rows are keyed by the wait (its workload and
the second it began) and merge by rule, so two replicas (or a restart) leave one row per wait, and every
replica reads the same figures back. The histogram is each replica's own: each counts the starts it saw.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import cast

from watchtower.domain.estimate_accuracy import TierAccuracy, accuracy, errors_of
from watchtower.domain.estimate_record import EstimateBook, book_from_store, record_estimates
from watchtower.domain.tick import Tick
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import EstimateMetrics, EstimateRecords

log = logging.getLogger("watchtower.estimates")

PRUNE_EVERY = 86400.0
WEEK = 7 * 86400.0
# How often the figures are read again from the store: a week's window moves little in five minutes, and
# the read is one indexed range of at most a week's waits.
REFRESH_EVERY = 300.0


class EstimateRecorder:
    def __init__(
        self,
        *,
        store: EstimateRecords,
        present: Callable[[WorkloadKey], bool],
        publish: Callable[[Mapping[str, TierAccuracy]], None],
        metrics: EstimateMetrics | None,
        retention_weeks: int,
        window_start: Callable[[float], float] | None = None,
        start_empty: bool = False,
    ) -> None:
        self.store = store
        self.present = present
        # Where the figures go: the schedule history, which hands them to every tick's estimates.
        self.publish = publish
        self.metrics = metrics
        self.retention = retention_weeks * WEEK
        # Where the figures' window begins for a tick at `now` (default: 7 days before it). The service's
        # is the start of the last complete ISO week: "last week" is then at least that whole week.
        self.window_start = window_start or (lambda now: now - WEEK)
        # A recorder of another cluster's past (the demo's simulated week) starts from nothing.
        self.start_empty = start_empty
        self.figures: Mapping[str, TierAccuracy] = {}
        self._book: EstimateBook | None = None
        self._refreshed_at: float | None = None
        self._pruned_at: float | None = None

    def _start(self) -> EstimateBook:
        if self.start_empty:
            return EstimateBook()
        return book_from_store(self.store.estimates_open())

    async def on_tick(self, tick: Tick) -> None:
        """Record what `tick` gave and ended; the store is read and written off the event loop."""
        if self._book is None:
            self._book = await asyncio.to_thread(self._start)
        book, given, ended = record_estimates(tick, self._book, present=self.present)
        if given or ended:
            await asyncio.to_thread(self.store.record_estimates, (*given, *ended))
        # Only once written: a failed write is tried again from the same book at the next tick.
        self._book = book
        if self.metrics is not None:
            for e in errors_of(ended):
                self.metrics.estimate_checked(e.tier, e.relative)
        now = tick.at
        # A recorder of another cluster's past shows no estimate: its figures are not read (in the demo's
        # simulated week they were a tenth of its recording).
        if not self.start_empty and (self._refreshed_at is None or now - self._refreshed_at >= REFRESH_EVERY):
            self._refreshed_at = now
            await self.refresh(now)
        if self._pruned_at is None or now - self._pruned_at >= PRUNE_EVERY:
            self._pruned_at = now
            removed = await asyncio.to_thread(self.store.prune_estimates, now - self.retention)
            if removed:
                log.info(
                    "start estimates pruned: %d rows older than %d weeks", removed, self.retention // WEEK
                )

    async def refresh(self, now: float) -> Mapping[str, TierAccuracy]:
        """Read the last week's checked estimates into each tier's figures, and hand them on."""
        rows = await asyncio.to_thread(self.store.estimates_started, self.window_start(now), now + 1)
        self.figures = accuracy(errors_of(rows))
        self.publish(self.figures)
        return self.figures


def estimates_of(*stores: object) -> EstimateRecords | None:
    """Return the first of `stores` that keeps the start estimates (EstimateRecords); None when none does."""
    for store in stores:
        if callable(getattr(store, "estimates_started", None)) and callable(
            getattr(store, "record_estimates", None)
        ):
            return cast(EstimateRecords, store)
    return None


def week_figures(store: EstimateRecords, start: float, end: float) -> tuple[TierAccuracy, ...]:
    """Return each tier's figures of the estimates whose work started in [start, end), by tier."""
    return tuple(accuracy(errors_of(store.estimates_started(start, end))).values())
