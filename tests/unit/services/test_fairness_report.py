"""The weekly report's figures, each worked out by hand from a known history in a real SQLite store and
known usage figures.

The week's usage comes from a stand-in for FairnessMetrics returning fixed UsageFigures: the Prometheus
reader of those figures is another part (tested against a real, backfilled Prometheus there); here the
figures are the contract's values, so that every number below follows from the few written in this file.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.config import Settings
from watchtower.config.fairness import FairnessConfig
from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode
from watchtower.domain.fairness.usage import ClusterUsage, SourceCoverage, TeamUsage, UsageFigures
from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fairness_report import FairnessReports, UnknownTeam

H = 3600.0
S = datetime(2026, 11, 16, tzinfo=UTC).timestamp()  # Monday of 2026-W47
E = S + 168 * H
WEEK = IsoWeek(2026, 47)


class FixedUsage:
    """FairnessMetrics for the test: the figures of W47 and W46; nothing for the weeks before."""

    def __init__(self, by_start: dict[float, UsageFigures]) -> None:
        self.by_start = by_start
        self.asked: list[tuple[float, float, float]] = []

    async def week_usage(self, start: float, end: float, step: float) -> UsageFigures:
        self.asked.append((start, end, step))
        return self.by_start.get(start, UsageFigures(start=start, end=end, step=step))


def w47_usage() -> UsageFigures:
    return UsageFigures(
        start=S,
        end=E,
        step=300,
        teams={
            "alpha": TeamUsage(840.0, 84.0, 100.0, 200.0, 4.0),
            "beta": TeamUsage(420.0, 0.0, 300.0, 100.0, 4.0),
            "gamma": TeamUsage(0.0, 0.0, None, None, 2.0),
        },
        cluster=ClusterUsage(
            capacity_gpu_hours=1680.0,
            allocated_gpu_hours=1260.0,
            idle_allocated_gpu_hours=84.0,
            free_while_waiting_gpu_hours=100.0,
            unavailable_gpu_hours=20.0,
            cpu_core_hours=1000.0,
            memory_gib_hours=1000.0,
            capacity_gpus=10.0,
        ),
        coverage=(SourceCoverage("kube-state-metrics", 168, 168), SourceCoverage("dcgm-exporter", 84, 168)),
    )


def w46_usage() -> UsageFigures:
    s = S - 168 * H
    return UsageFigures(
        start=s,
        end=S,
        step=300,
        teams={
            "alpha": TeamUsage(420.0, 0.0, None, None, 4.0),
            "beta": TeamUsage(420.0, 0.0, None, None, 4.0),
        },
        cluster=ClusterUsage(1680.0, 840.0, 42.0, 0.0, 0.0, None, None, 10.0),
    )


def ep(
    key: str, team: str, tier: str, gpus: int, start: float, end: float | None, outcome: str
) -> WaitEpisode:
    return WaitEpisode(
        key=key,
        source="pod",
        namespace=f"ns-{team}",
        team=team,
        tier=tier,
        workload=f"Job/{key}",
        gpus=gpus,
        started=start,
        ended=end,
        outcome=outcome,  # type: ignore[arg-type]
    )


def pre(
    key: str, at: float, victim: str, workload: str, lost: float | None, preemptor: str, ptier: str
) -> PreemptionRecord:
    return PreemptionRecord(
        key=key,
        at=at,
        victim_namespace=f"ns-{victim}",
        victim_team=victim,
        victim_tier="low",
        victim_workload=workload,
        preemptor_namespace=f"ns-{preemptor}" if preemptor else "",
        preemptor_team=preemptor,
        preemptor_tier=ptier,
        preemptor_workload="Pod/p" if preemptor else "",
        gpus=4,
        gpu_hours_lost=lost,
    )


def inc(key: str, kind: str, team: str, start: float, end: float | None) -> Incident:
    return Incident(key, kind, f"ns-{team}", team, "low", f"Job/{key}", 1, start, end)  # type: ignore[arg-type]


@pytest.fixture
def history(tmp_path: Path) -> SQLiteFairnessHistory:
    h = SQLiteFairnessHistory(tmp_path / "watchtower.db")
    h.record(
        [
            ep("e1", "beta", "low", 2, S + 10 * H, S + 20 * H, "scheduled"),
            ep("e2", "beta", "low", 16, S + 100 * H, None, "waiting"),
            ep("e3", "alpha", "high", 1, S - 2 * H, S + 1 * H, "scheduled"),
            ep("e4", "alpha", "high", 1, S + 50 * H, S + 50 * H + 600, "scheduled"),
            ep("e5", "alpha", "high", 2, S + 60 * H, S + 61 * H, "gone"),
            ep("e6", "alpha", "high", 1, S + 70 * H, S + 70 * H + 1200, "admitted"),
            ep("old", "alpha", "high", 8, S - 30 * H, S - 20 * H, "scheduled"),  # W46 only
        ],
        [
            pre("p1", S + 30 * H, "alpha", "Job/train", 8.0, "beta", "high"),
            pre(
                "p2", S + 30 * H + 10, "alpha", "Job/train", 8.0, "beta", "high"
            ),  # same gang, same preemption
            pre("p3", S + 40 * H, "beta", "Job/x", None, "", "unknown"),
            pre("p4", S - 1 * H, "alpha", "Job/train", 50.0, "beta", "high"),  # the week before
        ],
        [
            inc("i1", "starvation", "beta", S + 110 * H, None),
            inc("i2", "gang_stall", "alpha", S + 5 * H, S + 6 * H),
            inc("i3", "starvation", "alpha", S - 5 * H, S + 1 * H),  # began the week before
        ],
        heartbeats=[S + 60 * m for m in range(7 * 24 * 60)],
    )
    yield h
    h.close()


def reports(history: SQLiteFairnessHistory, metrics: FixedUsage | None) -> FairnessReports:
    s = Settings().model_copy(update={"fairness": FairnessConfig(entitlement="quota")})
    return FairnessReports(settings=s, history=history, metrics=metrics)


async def test_every_figure_of_a_known_week(history: SQLiteFairnessHistory) -> None:
    metrics = FixedUsage({S: w47_usage(), S - 168 * H: w46_usage()})
    r = await reports(history, metrics).build(WEEK, now=E + 3 * 86400)
    assert (r.week, r.start, r.end) == ("2026-W47", S, E)
    assert len(metrics.asked) == 8 and metrics.asked[0][0] == S - 7 * 168 * H  # 7 weeks back, then this one
    a, b, g = (r.team(n) for n in ("alpha", "beta", "gamma"))
    assert a is not None and b is not None and g is not None

    # E: capacity × quota share: 1680 × 4/10, 1680 × 4/10, 1680 × 2/10.
    assert (a.entitlement, b.entitlement, g.entitlement) == pytest.approx((672, 672, 336))
    assert a.entitlement_source == "quota"
    assert (a.attainment, b.attainment, g.attainment) == pytest.approx((840 / 672, 420 / 672, 0))
    assert (a.borrowed, b.borrowed, g.borrowed) == pytest.approx((168, 0, 0))
    # D: alpha 840 + 1 (e3's last hour) + 1/6 (e4) + 2 (e5, gone, but it waited) + 1/3 (e6) = 843.5;
    # beta 420 + 2 × 10 (e1) + 16 × 68 (e2, waiting from hour 100 to the week's end) = 1528.
    assert (a.demand, b.demand, g.demand) == pytest.approx((843.5, 1528, 0))
    assert (a.lent, b.lent, g.lent) == pytest.approx((0, 0, 336))
    # F: demand 2371.5 > capacity 1680, equal entitlements: each gets 840, both ask more.
    assert (a.fair_share, b.fair_share) == pytest.approx((840, 840))
    # x = min(1, U / min(D, F)): alpha 840/840 = 1, beta 420/840 = 0.5; gamma has no demand.
    assert (a.satisfaction, b.satisfaction, g.satisfaction) == pytest.approx((1.0, 0.5, None))
    # Jain's over alpha and beta only: (1 + 0.5)² / (2 × (1 + 0.25)) = 0.9.
    assert r.cluster.jain == pytest.approx(0.9)
    assert r.cluster.teams_with_demand == 2

    assert dict(a.shares) == pytest.approx({"gpu": 0.5, "cpu": 0.1, "memory": 0.2})
    assert a.dominant_resource == "gpu" and b.dominant_resource == "cpu"
    assert (a.idle_allocated, a.idle_share, b.idle_share) == pytest.approx((84, 0.1, 0))

    # Waits, nearest rank. alpha high: finished 600, 1200, 10800 (e5 gone is left out).
    (aw,) = a.waits
    assert (aw.tier, aw.finished, aw.p50, aw.p95, aw.max) == ("high", 3, 1200, 10800, 10800)
    assert (aw.censored, aw.censored_oldest) == (0, None)
    # beta low: e1's 10 h finished; e2 still waiting at the week's end, censored with its age 68 h.
    (bw,) = b.waits
    assert (bw.finished, bw.p50, bw.p95, bw.max) == (1, 36000, 36000, 36000)
    assert (bw.censored, bw.censored_oldest) == (1, 68 * H)

    # Preemptions: p1 and p2 are one preemption of Job/train; p4 is last week's.
    assert dict(a.preemptions_suffered) == {"low": 1}
    assert dict(b.preemptions_caused) == {"high": 1}
    assert dict(b.preemptions_suffered) == {"low": 1}
    assert a.gpu_hours_lost == pytest.approx(16.0) and b.gpu_hours_lost == 0
    # Incidents begun within the week.
    assert (b.starvation_incidents, a.starvation_incidents, a.gang_stalls) == (1, 0, 1)

    assert [(w.workload, w.gpus, w.seconds) for w in b.top_waiting] == [
        ("Job/e2", 16, 68 * H),
        ("Job/e1", 2, 10 * H),
    ]
    assert [w.workload for w in a.top_waiting] == ["Job/e3", "Job/e5", "Job/e6", "Job/e4"]

    bd = r.cluster.breakdown
    assert (bd.capacity, bd.allocated_busy, bd.allocated_idle, bd.planned, bd.free_idle, bd.unavailable) == (
        pytest.approx((1680, 1176, 84, 100, 300, 20))
    )
    assert r.cluster.capacity_gpus == 10

    # Last week: alpha 420 used, demand 420 + 2 (e3's first two hours) + 8 × 10 (old) = 502; beta 420.
    # Demand 922 < capacity: F = D, x alpha = 420/502, x beta = 1.
    xa = 420 / 502
    assert r.cluster.jain_last_week == pytest.approx((xa + 1) ** 2 / (2 * (xa * xa + 1)))
    trend = r.cluster.trend
    assert [p.week for p in trend] == [f"2026-W{n}" for n in range(40, 48)]
    assert [p.jain is None for p in trend] == [True] * 6 + [False, False]
    assert (trend[-1].used, trend[-1].capacity, trend[-1].idle_share) == pytest.approx(
        (1260, 1680, 84 / 1260)
    )


async def test_a_partly_covered_week_is_marked(history: SQLiteFairnessHistory) -> None:
    r = await reports(history, FixedUsage({S: w47_usage()})).build(WEEK, now=E + 60)
    cov = {c.name: c.fraction for c in r.coverage}
    assert cov == {"kube-state-metrics": 1.0, "dcgm-exporter": 0.5, "watchtower history": 1.0}
    assert any("dcgm-exporter covered 84.0 of 168.0 hours (50 %)" in n for n in r.notes)
    # Half of a later week recorded: the history's own coverage says so.
    history.record(heartbeats=[E + 60 * m for m in range(84 * 60)])
    later = await reports(history, FixedUsage({})).build(WEEK.previous(-1), now=E + 200 * H)
    hist = next(c for c in later.coverage if c.name == "watchtower history")
    assert (hist.hours_present, hist.fraction) == (84, 0.5)
    assert any(n.startswith("watchtower history covered 84.0 of 168.0 hours") for n in later.notes)


async def test_without_prometheus_the_history_figures_remain_and_usage_is_missing(
    history: SQLiteFairnessHistory,
) -> None:
    r = await reports(history, None).build(WEEK, now=E + 60)
    b = r.team("beta")
    assert b is not None
    assert (b.used, b.entitlement, b.demand, b.satisfaction, b.entitlement_source) == (
        None,
        None,
        None,
        None,
        "none",
    )
    assert r.cluster.jain is None and r.cluster.breakdown.capacity is None
    assert b.waits[0].censored == 1 and b.starvation_incidents == 1
    assert any("no Prometheus configured" in n for n in r.notes)


async def test_one_team_and_an_unknown_team(history: SQLiteFairnessHistory) -> None:
    rep = reports(history, FixedUsage({S: w47_usage()}))
    r = await rep.build(WEEK, now=E + 60, team="beta")
    assert [t.team for t in r.teams] == ["beta"] and r.cluster.jain == pytest.approx(0.9)
    with pytest.raises(UnknownTeam, match="no team 'delta'.*alpha, beta, gamma"):
        await rep.build(WEEK, now=E + 60, team="delta")


def test_the_default_week_is_the_last_complete_one(history: SQLiteFairnessHistory) -> None:
    rep = reports(history, None)
    assert rep.default_week(E + 1) == WEEK  # Monday 00:00:01 of W48
    assert rep.default_week(E - 1) == WEEK.previous()  # W47 not over yet


async def test_a_source_short_by_minutes_is_not_called_100_percent(history: SQLiteFairnessHistory) -> None:
    history.record(heartbeats=[E + 60 * m for m in range(2, 168 * 60)])  # the week's first 2 minutes missed
    r = await reports(history, FixedUsage({})).build(WEEK.previous(-1), now=E + 200 * H)
    assert any(n.startswith("watchtower history covered 167.97 of 168.0 hours (99 %)") for n in r.notes)


async def test_the_method_says_which_path_integrated_the_weeks_usage(history: SQLiteFairnessHistory) -> None:
    from dataclasses import replace

    from watchtower.adapters.report.presenter import FairnessPresenter
    from watchtower.api.fairness.json_view import report_dict

    by_rules = replace(
        w47_usage(), path="rules", recorded_hours=168.0, path_reason="168.0 recorded hours cover the 168.0 h"
    )
    r = await reports(history, FixedUsage({S: by_rules})).build(WEEK, now=E + 3 * 86400)
    words = "sums of the per-step values of the recording rules watchtower.fairness.usage.rules"
    assert r.method.usage_path == f"{words} (168.0 recorded hours cover the 168.0 h)"
    assert report_dict(r)["method"]["usage_path"] == r.method.usage_path
    assert report_dict(r)["method"]["recorded_hours"] == 168.0
    assert f"GPU-hours from Prometheus: {r.method.usage_path}" in FairnessPresenter().text(r)
    assert f"GPU-hours from Prometheus: {r.method.usage_path}." in FairnessPresenter().html(
        r, img=lambda name: name
    )

    slow = await reports(history, FixedUsage({S: w47_usage()})).build(WEEK, now=E + 3 * 86400)
    assert slow.method.usage_path.startswith("subqueries over the raw series")
    none = await reports(history, None).build(WEEK, now=E + 3 * 86400)
    assert none.method.usage_path == "no usage from Prometheus" and none.method.recorded_hours is None


async def test_a_settled_week_is_asked_of_prometheus_once_a_week_with_a_gap_each_time(
    history: SQLiteFairnessHistory,
) -> None:
    from dataclasses import replace

    whole = replace(
        w47_usage(),
        coverage=(SourceCoverage("kube-state-metrics", 168, 168), SourceCoverage("dcgm-exporter", 168, 168)),
    )
    metrics = FixedUsage({S: whole})
    rep = reports(history, metrics)
    # Read 10 minutes after the week's end: late scrapes may still come, asked again.
    await rep.build(WEEK, now=E + 600)
    await rep.build(WEEK, now=E + 600)
    assert [a[0] for a in metrics.asked].count(S) == 2
    metrics.asked.clear()
    first = await rep.build(WEEK, now=E + 2 * H)
    again = await rep.build(WEEK, now=E + 3 * H)
    assert [a[0] for a in metrics.asked].count(S) == 1  # kept after its first answer
    assert again.team("alpha") == first.team("alpha")
    # The weeks before it have no data at all (a gap): asked each time, so a backfill would be seen.
    assert [a[0] for a in metrics.asked].count(S - 168 * H) == 2

    gap = FixedUsage({S: w47_usage()})  # dcgm-exporter covered 84 of 168 h
    rep = reports(history, gap)
    await rep.build(WEEK, now=E + 2 * H)
    await rep.build(WEEK, now=E + 2 * H)
    assert [a[0] for a in gap.asked].count(S) == 2
