"""The fleet's fairness: each cluster's weekly report, computed as that cluster's own (compute.py), then
combined. Pure.

What is combined, and how (docs/fairness.md, "The fleet report"):
- per team and cluster, the cluster report's own U, E and attainment, unchanged;
- per team in all: U and E are sums of GPU-hours over the clusters that report them, attainment ΣU / ΣE;
- the fleet's Jain's index over the teams' fleet-wide satisfaction x = min(1, ΣU / Σ min(D, F)), the sums
  over the clusters where the team had demand, among the teams with demand anywhere: a team's x in each
  cluster is weighted by how much it could have had there;
- where each team waited: the clusters whose report has an episode of it (finished or still waiting).
A cluster that could not be read (its Watchtower, or its series in the engine) is named missing with why,
and takes no part in any sum: missing is never zero. A team absent from a cluster is simply not there.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .history import Incident, PreemptionRecord, WaitEpisode
from .report import FairnessReport, TeamReport
from .shares import jain_index, ratio


@dataclass(frozen=True, slots=True)
class HistoryWeek:
    """What one cluster's history holds for a week's report (`GET /api/v1/fairness/history?week=W`): the
    episodes since `since` (the trend's first week) and the week's preemptions, incidents and recorded
    hours, as FairnessReports.build reads them from the store."""

    week: str
    timezone: str
    start: float
    end: float
    since: float
    episodes: tuple[WaitEpisode, ...]
    preemptions: tuple[PreemptionRecord, ...]
    incidents: tuple[Incident, ...]
    history_hours: float


@dataclass(frozen=True, slots=True)
class ClusterTeam:
    """One team in one cluster: its cluster report's figures."""

    cluster: str
    used: float | None
    entitlement: float | None
    attainment: float | None
    demand: float | None
    fair_share: float | None
    satisfaction: float | None
    waited: bool


@dataclass(frozen=True, slots=True)
class FleetTeam:
    team: str
    clusters: tuple[ClusterTeam, ...]  # the clusters that name the team, by cluster name
    used: float | None  # Σ U over them (None when none knows it)
    entitlement: float | None  # Σ E
    attainment: float | None  # Σ U / Σ E
    satisfaction: float | None  # min(1, Σ U / Σ min(D, F)); None without demand anywhere
    waited_in: tuple[str, ...]  # clusters where it waited


@dataclass(frozen=True, slots=True)
class FleetCluster:
    name: str
    missing: str | None  # why the cluster is not counted; None when it is
    used: float | None  # its GPU-hours used by all teams
    capacity_gpus: float | None
    jain: float | None  # its own report's index
    teams: int


@dataclass(frozen=True, slots=True)
class FleetReport:
    week: str
    start: float
    end: float
    generated_at: float
    clusters: tuple[FleetCluster, ...]  # every cluster asked for, missing ones included
    teams: tuple[FleetTeam, ...]  # by team name
    used: float | None  # GPU-hours used in all counted clusters
    entitled: float | None
    jain: float | None  # over the teams' fleet-wide satisfaction
    teams_with_demand: int
    notes: tuple[str, ...] = ()

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(c.name for c in self.clusters if c.missing is not None)


def _sum(values: Sequence[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _waited(t: TeamReport) -> bool:
    return any(w.finished or w.censored for w in t.waits)


def combine(
    week: str,
    start: float,
    end: float,
    generated_at: float,
    reports: Mapping[str, FairnessReport],
    missing: Mapping[str, str],
) -> FleetReport:
    """Return the fleet report of `reports` (cluster → its own report of `week`); `missing` names the
    clusters that could not be read and why. A cluster in both is missing."""
    counted = {c: r for c, r in reports.items() if c not in missing}
    rows: dict[str, list[ClusterTeam]] = {}
    bounds: dict[str, list[float]] = {}
    for cluster in sorted(counted):
        for t in counted[cluster].teams:
            rows.setdefault(t.team, []).append(
                ClusterTeam(
                    cluster=cluster,
                    used=t.used,
                    entitlement=t.entitlement,
                    attainment=t.attainment,
                    demand=t.demand,
                    fair_share=t.fair_share,
                    satisfaction=t.satisfaction,
                    waited=_waited(t),
                )
            )
            if t.demand is not None and t.fair_share is not None and t.demand > 0:
                bounds.setdefault(t.team, []).append(min(t.demand, t.fair_share))
    teams = []
    for name in sorted(rows):
        per = rows[name]
        used, ent = _sum([c.used for c in per]), _sum([c.entitlement for c in per])
        bound = sum(bounds.get(name, ()))
        x = None if used is None or bound <= 0 else min(1.0, used / bound)
        teams.append(
            FleetTeam(
                team=name,
                clusters=tuple(per),
                used=used,
                entitlement=ent,
                attainment=ratio(used, ent),
                satisfaction=x,
                waited_in=tuple(c.cluster for c in per if c.waited),
            )
        )
    clusters = tuple(
        FleetCluster(
            name=c,
            missing=missing.get(c),
            used=_sum([t.used for t in reports[c].teams]) if c in counted else None,
            capacity_gpus=reports[c].cluster.capacity_gpus if c in counted else None,
            jain=reports[c].cluster.jain if c in counted else None,
            teams=len(reports[c].teams) if c in counted else 0,
        )
        for c in sorted(set(reports) | set(missing))
    )
    notes = [f"cluster {c} is missing: {why}; it is not counted" for c, why in sorted(missing.items())]
    return FleetReport(
        week=week,
        start=start,
        end=end,
        generated_at=generated_at,
        clusters=clusters,
        teams=tuple(teams),
        used=_sum([t.used for t in teams]),
        entitled=_sum([t.entitlement for t in teams]),
        jain=jain_index({t.team: t.satisfaction for t in teams}),
        teams_with_demand=sum(1 for t in teams if t.satisfaction is not None),
        notes=tuple(notes),
    )
