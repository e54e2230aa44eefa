"""The demo's past week: a second simulated cluster (the demo's seed + 1, so no uid is shared) run at full
speed through the last complete ISO week before the demo's clock, recorded into the demo's store by the
service's own recorder (the same `record_tick` through the same FairnessHistory), so the report of that week
is made by the same code path as any other.

It runs in a worker thread beside the live demo. The waits still open at the week's end are closed there as
`gone`: that cluster ends with the week, and a wait ended exactly at the end is still censored in that week's
report and adds nothing to the next. Every write is an upsert by key, so a live recorder that read one of
these waits while it was open and closed it later changes nothing (the earlier closing is kept).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import zoneinfo
from dataclasses import dataclass

from watchtower.config.model import Settings
from watchtower.domain.fairness.week import IsoWeek

log = logging.getLogger(__name__)

STEP = 120.0  # simulated seconds between ticks: within the recorder's heartbeat gap, so the week is covered


@dataclass(frozen=True, slots=True)
class PastWeek:
    week: IsoWeek
    ticks: int
    completed: bool  # False: stopped before the week's end (the demo was stopped)


def past_week_of(settings: Settings, now: float) -> IsoWeek:
    """Return the week the demo simulates: the last complete ISO week before `now`."""
    return IsoWeek.containing(now, zoneinfo.ZoneInfo(settings.fairness.timezone)).previous()


def record_past_week(
    settings: Settings, week: IsoWeek, stop: threading.Event, *, span: float | None = None
) -> PastWeek:
    """Simulate `week` at full speed and record it into the store `settings` name; return what was done.
    Blocking (run it in a thread); `stop` ends it early. `span`: simulate only the week's first `span`
    seconds, the cluster ending there (a shorter past, for tests)."""
    return asyncio.run(_record(settings, week, stop, span))


async def _record(settings: Settings, week: IsoWeek, stop: threading.Event, span: float | None) -> PastWeek:
    import msgspec

    from watchtower.adapters.sim.cluster import KINDS, SimulatedCluster
    from watchtower.bootstrap import build_container, fairness_recorder, open_history

    start, end = week.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
    if span is not None:
        end = min(end, start + span)
    sim = SimulatedCluster(
        settings.simulator.model_copy(update={"seed": settings.simulator.seed + 1, "metrics_port": 0}),
        start=start,
    )
    history = open_history(settings)  # its own connection to the demo's store file
    if history is None:
        return PastWeek(week, 0, False)
    try:
        c = build_container(
            settings, clock=sim, source_health=sim.feed_health, source_name="sim", history=history
        )
        recorder = fairness_recorder(c, start_empty=True)
        assert recorder is not None  # the history was given
        w = c.watcher
        for kind in KINDS:
            w.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
        ticks = 0
        while sim.now() < end and not stop.is_set():
            sim.step(min(STEP, end - sim.now()))
            for kind, type_, raw in sim.drain():
                w.on_change(kind, type_, raw)
            now = sim.now()
            tick = w.evaluate(now)
            w.prune(now)
            await recorder.on_tick(tick)
            ticks += 1
        if stop.is_set():
            return PastWeek(week, ticks, False)
        episodes, incidents = history.open_waits()
        history.record(
            [dataclasses.replace(e, ended=end, outcome="gone") for e in episodes if e.started < end],
            incidents=[dataclasses.replace(i, ended=end) for i in incidents if i.started < end],
        )
        return PastWeek(week, ticks, True)
    finally:
        history.close()
