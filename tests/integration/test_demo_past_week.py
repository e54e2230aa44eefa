"""The demo's simulated past week: a second simulated cluster run at full speed through (the first hours
of) a past ISO week, recorded into the store by the service's recorder, then reported by the same report
service as any week. Real parts: the simulator, the watcher, the recorder, the SQLite history, the report
service. A shortened week (`span`) keeps the run to seconds; `watchtower demo` simulates the whole week."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC
from pathlib import Path

from watchtower.adapters.history_sqlite import SQLiteFairnessHistory
from watchtower.adapters.sim.cluster import DEFAULT_START
from watchtower.bootstrap import report_once
from watchtower.config import settings_from_mapping
from watchtower.demo_past_week import past_week_of, record_past_week
from watchtower.domain.fairness.history import WaitEpisode

SPAN = 6 * 3600.0


async def test_the_past_week_is_recorded_closed_at_its_end_and_reported(tmp_path: Path) -> None:
    settings = settings_from_mapping({"store": {"path": str(tmp_path / "state.db")}}, env={})
    week = past_week_of(settings, DEFAULT_START)
    assert str(week) == "2025-W52"  # the last complete week before the demo's clock
    start, end = week.bounds(UTC)
    # A wait the live demo's recorder holds open (its cluster starts after the past week): left alone.
    live = WaitEpisode("wait:live", "pod", "nlp", "nlp", "low", "Job/live", 1, DEFAULT_START, None, "waiting")
    h = SQLiteFairnessHistory(settings.store.path)
    h.record([live])
    h.close()

    done = await asyncio.to_thread(record_past_week, settings, week, threading.Event(), span=SPAN)
    assert done.completed and done.ticks == SPAN / 120

    h = SQLiteFairnessHistory(settings.store.path)
    episodes, _ = h.open_waits()
    assert episodes == [live]  # the past cluster's waits were closed where it ended
    assert h.history_coverage(start, end) >= SPAN / 3600 - 0.1  # every tick's minute
    # The waits still open when the past cluster ended are closed there (with the whole week: at its end,
    # where the report counts them as censored), so none stays open for the live recorder.
    assert [e for e in h.episodes(start, end) if e.ended == start + SPAN and e.outcome == "gone"]
    h.close()

    report = await report_once(settings, week, team=None, now=DEFAULT_START)
    assert sum(w.finished for t in report.teams for w in t.waits) > 0
    assert sum(t.preemptions_suffered.get("low", 0) for t in report.teams) > 0
    # The week after has none of the past cluster's waits: only the live one is still waiting.
    nxt = await report_once(settings, week.previous(-1), team=None, now=DEFAULT_START + 3600)
    assert sum(w.censored for t in nxt.teams for w in t.waits) == 1


def test_stopping_it_ends_the_run_early(tmp_path: Path) -> None:
    settings = settings_from_mapping({"store": {"path": str(tmp_path / "state.db")}}, env={})
    stop = threading.Event()
    stop.set()
    done = record_past_week(settings, past_week_of(settings, DEFAULT_START), stop)
    assert not done.completed and done.ticks == 0
