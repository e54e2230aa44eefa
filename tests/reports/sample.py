"""Hand-made weekly reports (the contract's types, filled by hand) for the presenter and delivery tests.

The real ones come from the report service; these hold what the presenters must cope with: a team whose
name and namespace are hostile, a team with missing figures, partial coverage, a censored wait.
"""

from __future__ import annotations

from datetime import UTC
from zoneinfo import ZoneInfo

from watchtower.domain.fairness.report import (
    ClusterReport,
    FairnessReport,
    GpuHoursBreakdown,
    Method,
    TeamReport,
    TierWaits,
    TrendPoint,
    WorkloadLine,
)
from watchtower.domain.fairness.usage import SourceCoverage
from watchtower.domain.fairness.week import IsoWeek

WEEK = "2026-W47"
# A name that tries everything: markup, a script, quotes, a header injection, a formula for spreadsheets.
HOSTILE_TEAM = '=cmd|<script>alert("x")</script>\r\nBcc: victim@evil.example'
HOSTILE_NS = 'ns-"quoted"-<b>bold</b>'


def vision(used: float | None = 2016.0) -> TeamReport:
    return TeamReport(
        team="vision",
        namespaces=("team-vision",),
        used=used,
        entitlement=3360.0,
        entitlement_source="quota",
        attainment=None if used is None else used / 3360.0,
        borrowed=0.0,
        lent=1344.0,
        demand=2500.0,
        fair_share=4032.0,
        satisfaction=None if used is None else min(1.0, used / 2500.0),
        shares={"gpu": 0.25, "cpu": 0.125, "memory": 0.2},
        dominant_resource="gpu",
        waits=(
            TierWaits("critical", 4, 120.0, 290.0, 300.0, 0, None),
            TierWaits("low", 30, 1800.0, 14400.0, 20000.0, 2, 93600.0),
        ),
        preemptions_suffered={"low": 3},
        preemptions_caused={"critical": 1},
        gpu_hours_lost=42.5,
        idle_allocated=201.6,
        idle_share=0.1,
        starvation_incidents=1,
        gang_stalls=0,
        long_running=(WorkloadLine("team-vision", "PaddleJob/pretrain", "low", 32, 280000.0),),
        top_waiting=(WorkloadLine("team-vision", "Job/batch-0005", "low", 8, 93600.0),),
    )


def hostile() -> TeamReport:
    return TeamReport(
        team=HOSTILE_TEAM,
        namespaces=(HOSTILE_NS,),
        used=None,  # Prometheus had nothing for it: missing, never 0
        entitlement=1680.0,
        entitlement_source="weight",
        attainment=None,
        borrowed=None,
        lent=None,
        demand=None,
        fair_share=None,
        satisfaction=None,
        shares={"gpu": None, "cpu": None, "memory": None},
        dominant_resource=None,
        waits=(TierWaits("high", 0, None, None, None, 1, 7200.0),),
        preemptions_suffered={},
        preemptions_caused={"high": 2},
        gpu_hours_lost=0.0,
        idle_allocated=None,
        idle_share=None,
        starvation_incidents=0,
        gang_stalls=1,
        long_running=(),
        top_waiting=(WorkloadLine(HOSTILE_NS, 'Job/<img src=x onerror="alert(1)">', "high", 4, 7200.0),),
    )


def nlp() -> TeamReport:
    return TeamReport(
        team="nlp",
        namespaces=("team-nlp", "nlp-serving"),
        used=5040.0,
        entitlement=3360.0,
        entitlement_source="quota",
        attainment=1.5,
        borrowed=1680.0,
        lent=0.0,
        demand=6000.0,
        fair_share=4704.0,
        satisfaction=1.0,
        shares={"gpu": 0.375, "cpu": 0.3, "memory": 0.4},
        dominant_resource="memory",
        waits=(TierWaits("high", 12, 300.0, 900.0, 1200.0, 0, None),),
        preemptions_suffered={},
        preemptions_caused={"high": 3},
        gpu_hours_lost=0.0,
        idle_allocated=504.0,
        idle_share=0.1,
        starvation_incidents=0,
        gang_stalls=0,
        long_running=(),
        top_waiting=(),
    )


def report(
    *, teams: tuple[TeamReport, ...] | None = None, week: str = WEEK, tz: str = "UTC"
) -> FairnessReport:
    start, end = IsoWeek.parse(week).bounds(ZoneInfo(tz) if tz != "UTC" else UTC)
    trend = tuple(
        TrendPoint(
            str(IsoWeek.parse(week).previous(7 - i)),
            None if i == 2 else 0.8 + i * 0.02,
            8000.0 + 100 * i,
            13440.0,
            0.1,
        )
        for i in range(8)
    )
    return FairnessReport(
        week=week,
        timezone=tz,
        start=start,
        end=end,
        generated_at=end + 9 * 3600,
        coverage=(
            SourceCoverage("kube-state-metrics", 168.0, 168.0),
            SourceCoverage("dcgm-exporter", 150.5, 168.0),  # a 17.5 h gap: partial
            SourceCoverage("watchtower", 168.0, 168.0),
        ),
        cluster=ClusterReport(
            capacity_gpus=80.0,
            breakdown=GpuHoursBreakdown(
                capacity=13440.0,
                allocated_busy=6350.4,
                allocated_idle=705.6,
                planned=1200.0,
                free_idle=4512.0,
                unavailable=672.0,
            ),
            jain=0.912,
            jain_last_week=0.874,
            teams_with_demand=2,
            trend=trend,
        ),
        teams=teams if teams is not None else (hostile(), nlp(), vision()),
        method=Method(
            idle_threshold=10.0,
            critical_after={"critical": 300.0, "high": 900.0, "medium": 1800.0, "low": 7200.0},
            long_running_after=259200.0,
            step=300.0,
            entitlement="auto: ResourceQuota GPUs as a share of capacity",
        ),
        notes=("dcgm-exporter reported 150.5 of 168 hours: idle figures rest on those hours",),
    )


class StandIn:
    """A report source that gives the hand-made report for any week (the report service's stand-in); it
    counts its calls and can be told to fail like an unreachable Prometheus."""

    def __init__(self, rep: FairnessReport | None = None) -> None:
        self.rep = rep or report()
        self.calls: list[tuple[str, str | None]] = []
        self.fail: Exception | None = None

    async def __call__(self, week: IsoWeek, team: str | None) -> FairnessReport:
        self.calls.append((str(week), team))
        if self.fail is not None:
            raise self.fail
        import dataclasses

        r = self.rep if str(week) == self.rep.week else dataclasses.replace(self.rep, week=str(week))
        if team is not None:
            r = dataclasses.replace(r, teams=tuple(t for t in r.teams if t.team == team))
        return r
