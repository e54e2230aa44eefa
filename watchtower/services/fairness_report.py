"""One fairness report: the week's history from the store, its usage from Prometheus (when there is one),
the cluster's entitlement as it is now, computed by domain/fairness/compute.py. The API, the CLI and the
weekly send all call `FairnessReports.build`, so every door shows the same figures."""

from __future__ import annotations

import asyncio
import logging
import zoneinfo
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from watchtower.config.model import Settings
from watchtower.domain.fairness.compute import (
    FORMULAS,
    ReportInputs,
    RunningLine,
    TeamEntitlement,
    WeekUsage,
    compute_report,
)
from watchtower.domain.fairness.inputs import entitlements
from watchtower.domain.fairness.report import FairnessReport, Method
from watchtower.domain.fairness.usage import UsageFigures, usage_path_words
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.tick import Tick
from watchtower.ports import EstimateRecords, FairnessHistory, FairnessMetrics, PromReadError

from .estimate_record import week_figures
from .what_if import WhatIfReplays

log = logging.getLogger("watchtower.fairness")

TREND_WEEKS = 8  # this week and the 7 before it
# An ended week's usage is kept once every source covered all of it and this long has passed since its
# end (late scrapes and rule evaluations are in): Prometheus's answer for it cannot change any more, and
# the subquery path takes half a minute for a busy week. A week with a gap is asked again each time, so a
# backfill that fills it is seen.
SETTLED_AFTER = 3600.0
_KEPT_WEEKS = 64
_DEFAULT_IDLE_THRESHOLD = 10.0

_ENTITLEMENT_WORDS = {
    "auto": "team by team, its Kueue ClusterQueue nominal GPUs, else its Volcano Queue deserved GPUs, else "
    "its ResourceQuota GPUs as a share of capacity (0 for a team none of them names); the configured "
    "weights (1 for a team not named) when none names any team",
    "quota": "each team's ResourceQuota GPUs as a share of capacity",
    "weight": "the configured weights as shares of capacity (1 for a team not named)",
    "volcano": "each team's Volcano Queue deserved GPUs × the hours capacity was measured",
    "kueue": "each team's Kueue ClusterQueue nominal GPUs × the hours capacity was measured",
}


class UnknownTeam(LookupError):
    """A team the week's report does not name."""

    def __init__(self, team: str, known: Sequence[str]) -> None:
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        super().__init__(f"no team {team!r} in this report (teams: {shown or 'none'})")
        self.team = team


@dataclass(frozen=True, slots=True)
class ClusterNow:
    """What the live service knows of the cluster now; the CLI, which watches nothing, has none of it."""

    tick: Callable[[], Tick | None]
    namespaces: Callable[[], Mapping[str, Sequence[str]]]
    running: Callable[[], Sequence[RunningLine]]


class FairnessReports:
    def __init__(
        self,
        *,
        settings: Settings,
        history: FairnessHistory,
        metrics: FairnessMetrics | None,
        cluster: ClusterNow | None = None,
        what_if: WhatIfReplays | None = None,
        estimates: EstimateRecords | None = None,
    ) -> None:
        self.settings = settings
        self.cfg = settings.fairness
        self.history = history
        self.metrics = metrics
        self.cluster = cluster
        self.what_if = what_if
        self.estimates = estimates  # the start estimates checked (issue 33); None: not kept
        self.tz = zoneinfo.ZoneInfo(self.cfg.timezone)
        self._settled: dict[tuple[float, float, float], UsageFigures] = {}  # (start, end, step) → figures

    def default_week(self, now: float) -> IsoWeek:
        """Return the last complete ISO week before `now`, in the configured timezone."""
        return IsoWeek.containing(now, self.tz).previous()

    def method(self, usage: UsageFigures | None = None) -> Method:
        prom = self.settings.prometheus
        return Method(
            usage_path=usage_path_words(usage),
            recorded_hours=usage.recorded_hours if usage is not None else None,
            idle_threshold=prom.idle_threshold if prom is not None else _DEFAULT_IDLE_THRESHOLD,
            critical_after={t.name: t.critical_after for t in self.settings.tiers},
            long_running_after=self.cfg.long_running_after,
            step=self.cfg.step,
            entitlement=_ENTITLEMENT_WORDS[self.cfg.entitlement],
            formulas=FORMULAS,
        )

    async def build(self, week: IsoWeek, *, now: float, team: str | None = None) -> FairnessReport:
        """Return the report of `week` (only `team` among the teams when given).

        Raises UnknownTeam when `team` is not in the week's report."""
        weeks = [week.previous(n) for n in range(TREND_WEEKS - 1, -1, -1)]
        bounds = [w.bounds(self.tz) for w in weeks]
        start, end = bounds[-1]
        notes: list[str] = []
        usages = await self._usages(bounds, notes, now)
        h = self.history
        episodes, preemptions, incidents, hours = await asyncio.to_thread(
            lambda: (
                h.episodes(bounds[0][0], end),
                h.preemptions(start, end),
                h.incidents(start, end),
                h.history_coverage(start, end),
            )
        )
        tick = self.cluster.tick() if self.cluster is not None else None
        ent: Mapping[str, TeamEntitlement] = entitlements(tick, self.cfg.weights)
        ent = _with_prometheus_quota(ent, usages[-1])
        if self.cluster is None:
            notes.append(
                "read without the live cluster: entitlement from Prometheus quota figures or weights only, "
                "no namespaces and no list of long-running workloads"
            )
        inp = ReportInputs(
            week=str(week),
            timezone=self.cfg.timezone,
            start=start,
            end=end,
            generated_at=now,
            usage=usages[-1],
            earlier=[
                WeekUsage(str(w), b[0], b[1], u)
                for w, b, u in zip(weeks[:-1], bounds[:-1], usages[:-1], strict=True)
            ],
            episodes=episodes,
            preemptions=preemptions,
            incidents=incidents,
            history_hours=hours,
            entitlement=ent,
            namespaces=self.cluster.namespaces() if self.cluster is not None else {},
            method=self.method(usages[-1]),
            entitlement_mode=self.cfg.entitlement,
            weights=self.cfg.weights,
            running=self.cluster.running() if self.cluster is not None else (),
            top_waiting=self.cfg.top_waiting,
            notes=notes,
        )
        report = compute_report(inp)
        if self.what_if is not None:
            report = replace(report, what_if=await self.what_if.section(start, end, now=now))
        if self.estimates is not None:
            report = replace(
                report, estimates=await asyncio.to_thread(week_figures, self.estimates, start, end)
            )
        if team is None:
            return report
        if report.team(team) is None:
            raise UnknownTeam(team, [t.team for t in report.teams])
        return report.for_teams([team])

    async def _usages(
        self, bounds: Sequence[tuple[float, float]], notes: list[str], now: float
    ) -> list[UsageFigures | None]:
        if self.metrics is None:
            why = (
                "no Prometheus configured"
                if self.settings.prometheus is None
                else "no reader of the week's usage from Prometheus"
            )
            notes.append(f"{why}: GPU-hours, entitlement shares, fairness and idle figures are missing")
            return [None] * len(bounds)
        out: list[UsageFigures | None] = []
        failed = False
        for s, e in bounds:
            key = (s, e, self.cfg.step)
            if (kept := self._settled.get(key)) is not None:
                out.append(kept)
                continue
            try:
                got = await self.metrics.week_usage(s, e, self.cfg.step)
                out.append(got)
                if _settled(got, now):
                    if len(self._settled) >= _KEPT_WEEKS:
                        del self._settled[min(self._settled)]  # the oldest week
                    self._settled[key] = got
            except PromReadError as err:
                log.warning("fairness report: Prometheus could not answer for %s..%s: %s", s, e, err)
                out.append(None)
                failed = True
        if failed:
            notes.append("Prometheus could not answer for some weeks: their usage figures are missing")
        return out


def _settled(u: UsageFigures, now: float) -> bool:
    """Whether `u` is an ended week every source covered wholly (to within a step), read long enough
    after its end."""
    if now < u.end + SETTLED_AFTER or not u.coverage:
        return False
    slack = u.step / 3600.0
    return all(c.hours_present >= c.hours_expected - slack for c in u.coverage)


def _with_prometheus_quota(
    ent: Mapping[str, TeamEntitlement], usage: UsageFigures | None
) -> dict[str, TeamEntitlement]:
    """Return the entitlements with each team's quota taken from Prometheus's week average where it has
    one: the quota in force over the week, not only now."""
    out = dict(ent)
    if usage is None:
        return out
    for team, tu in usage.teams.items():
        if tu.quota_gpus is None:
            continue
        out[team] = replace(out.get(team, TeamEntitlement()), quota_gpus=tu.quota_gpus)
    return out
