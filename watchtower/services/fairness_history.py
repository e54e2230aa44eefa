"""One week's fairness history as another Watchtower's fleet report reads it
(`GET /api/v1/fairness/history?week=W`): exactly what FairnessReports.build reads from the store for that
week, so the fleet report computes this cluster's figures from the same facts as its own report."""

from __future__ import annotations

import asyncio

from watchtower.domain.fairness.fleet import HistoryWeek
from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fairness_report import TREND_WEEKS, FairnessReports


async def history_week(reports: FairnessReports, week: IsoWeek) -> HistoryWeek:
    """Return `week`'s history in the store: the episodes from the trend's first week, the rest of the
    week alone, with the same bounds as `reports.build` (this service's timezone)."""
    since = week.previous(TREND_WEEKS - 1).bounds(reports.tz)[0]
    start, end = week.bounds(reports.tz)
    h = reports.history
    episodes, preemptions, incidents, hours = await asyncio.to_thread(
        lambda: (
            h.episodes(since, end),
            h.preemptions(start, end),
            h.incidents(start, end),
            h.history_coverage(start, end),
        )
    )
    return HistoryWeek(
        week=str(week),
        timezone=reports.cfg.timezone,
        start=start,
        end=end,
        since=since,
        episodes=tuple(episodes),
        preemptions=tuple(preemptions),
        incidents=tuple(incidents),
        history_hours=hours,
    )
