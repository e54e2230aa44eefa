"""One week's fairness: per team the used GPU-hours U, the demand D, the max-min fair share F and the
satisfaction x, and Jain's index over the teams with demand; the trend's point for a week."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .history import WaitEpisode
from .report import TrendPoint
from .shares import jain_index, max_min_shares, ratio, satisfaction
from .usage import UsageFigures
from .waits import waiting_gpu_hours


@dataclass(frozen=True, slots=True)
class WeekFairness:
    """Per team U, D, F and x (None: not known), and Jain's index over the teams with demand."""

    used: dict[str, float | None]
    demand: dict[str, float | None]
    fair: dict[str, float | None]
    x: dict[str, float | None]
    jain: float | None


def week_fairness(
    teams: Sequence[str],
    usage: UsageFigures | None,
    episodes: Sequence[WaitEpisode],
    start: float,
    end: float,
    entitled: Mapping[str, float | None],
) -> WeekFairness:
    """Return the week's fairness from its usage and wait episodes in [start, end), weighted by E where every
    team with demand has one."""
    cap = usage.cluster.capacity_gpu_hours if usage is not None and usage.cluster is not None else None
    waiting = waiting_gpu_hours(episodes, start, end)
    used: dict[str, float | None] = {}
    demand: dict[str, float | None] = {}
    for t in teams:
        tu = usage.teams.get(t) if usage is not None else None
        u = tu.gpu_hours if tu is not None else (0.0 if usage is not None and usage.cluster else None)
        used[t] = u
        demand[t] = None if u is None else u + waiting.get(t, 0.0)
    fair: dict[str, float | None] = dict.fromkeys(teams)
    x: dict[str, float | None] = dict.fromkeys(teams)
    known = {t: d for t, d in demand.items() if d is not None}
    if cap is not None and known:
        with_demand = [t for t, d in known.items() if d > 0]
        weights = None
        if with_demand and all((entitled.get(t) or 0) > 0 for t in with_demand):
            weights = {t: float(entitled[t] or 0.0) for t in with_demand}
        shares = max_min_shares(cap, known, weights)
        for t, d in known.items():
            fair[t] = shares[t]
            u = used[t]
            x[t] = satisfaction(u, d, shares[t]) if u is not None else None
    return WeekFairness(used, demand, fair, x, jain_index(x) if cap is not None else None)


def trend_point(week: str, usage: UsageFigures | None, wf: WeekFairness) -> TrendPoint:
    """Return the trend's point for one week: Jain's index, the GPU-hours used, capacity, idle share."""
    c = usage.cluster if usage is not None else None
    known = [u for u in wf.used.values() if u is not None]
    used = sum(known) if c is not None and known else None
    idle = c.idle_allocated_gpu_hours if c is not None else None
    alloc = c.allocated_gpu_hours if c is not None else None
    return TrendPoint(
        week=week,
        jain=wf.jain,
        used=used,
        capacity=c.capacity_gpu_hours if c is not None else None,
        idle_share=ratio(idle, alloc),
    )
