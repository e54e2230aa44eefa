"""The weekly fairness report from its inputs: the week, Prometheus's usage figures (this week and up to 7
earlier ones), the recorded history, the teams' entitlement inputs. Pure: `generated_at` is passed in.

docs/fairness.md gives every formula; `FORMULAS` is the same text, printed in the report's "how these are
computed" section. A figure whose inputs are missing is None, never 0.

The formulas are grouped by what they compute: `satisfaction` (U, D, F, x and Jain's index of a week),
`waits` (percentiles, censored waits, waited GPU-hours), `breakdown` (resource shares, where the GPU-hours
went), `shares` (max-min filling, Jain's index); entitlement E is `live.entitled_gpus`, here in GPU-hours.
This module holds the report's inputs, counts the preemptions and joins the parts into the report.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import cast

from watchtower.domain.preemption_outcome import DID_NOT_HELP

from .breakdown import gpu_hours_breakdown, resource_shares
from .history import Incident, PreemptionRecord, WaitEpisode
from .live import EntitlementMode, Pool, entitled_gpus
from .report import (
    ClusterReport,
    EntitlementSource,
    FairnessReport,
    Method,
    TeamReport,
    WorkloadLine,
)
from .satisfaction import trend_point, week_fairness
from .shares import ratio
from .usage import ClusterUsage, SourceCoverage, UsageFigures
from .waits import tier_waits, top_waiting

# Preemption records are per victim pod; the pods of one workload preempted within this many seconds of
# each other are one preemption (a gang goes at once), as the queue's thrash count has it.
GANG_PREEMPTION_GAP = 60.0

HISTORY_SOURCE = "watchtower history"

FORMULAS: tuple[str, ...] = (
    "U: GPU-hours the team's running pods requested, integrated over the week by Prometheus.",
    "E: a Kueue ClusterQueue's nominal GPUs or a Volcano Queue's deserved GPUs (split evenly among the teams "
    "sharing it) × the hours capacity was measured; ResourceQuota GPUs or configured weights as a share of "
    "capacity, capacity × g / Σg. `auto` takes, team by team, the first of Kueue, Volcano and quota that names "
    "the team (the report names it), the configured weights when none names any team. attainment = U / E.",
    "borrowed = max(0, U − E); lent = max(0, E − D): entitlement the team had no demand for.",
    "D = U + Σ GPUs × hours of the team's wait episodes within the week (still-waiting ones up to the week's end).",
    "F: max-min fair share of capacity over the demands (progressive filling), weighted by E where every team "
    "with demand has one; x = min(1, U / min(D, F)).",
    "Jain's index = (Σx)² / (n·Σx²) over the n teams with demand (D > 0).",
    "Dominant resource share: the largest of the team's GPU, CPU and memory hours over the cluster's.",
    "Waits: the episodes that ended with the work placed within the week; percentiles by nearest rank "
    "(the ⌈p/100·n⌉-th smallest); episodes still waiting at the week's end are censored (count, oldest age), "
    "those deleted while waiting are left out.",
    "Preemptions: one per victim workload (its pods preempted within 60 s are one); GPU-hours lost = Σ GPUs × "
    "time the victim pod had run.",
    "Idle-allocated: the team's allocated GPU-hours with DCGM utilisation under θ; share = idle / U.",
    "Breakdown: busy = allocated − idle-allocated; planned = free while GPU work waited; free with no demand = "
    "capacity − allocated − planned − unavailable.",
)


@dataclass(frozen=True, slots=True)
class TeamEntitlement:
    """What the cluster says a team is entitled to, per source; None where that source says nothing."""

    quota_gpus: float | None = None
    weight: float | None = None
    volcano_deserved_gpus: float | None = None
    kueue_nominal_gpus: float | None = None


@dataclass(frozen=True, slots=True)
class RunningLine:
    """A workload running at the week's end, with when it started (for the > 72 h list)."""

    team: str
    namespace: str
    workload: str
    tier: str
    gpus: int
    started: float


@dataclass(frozen=True, slots=True)
class WeekUsage:
    """One earlier week for the trend: its name, bounds and Prometheus's figures (None: not available)."""

    week: str
    start: float
    end: float
    usage: UsageFigures | None


@dataclass(frozen=True, slots=True)
class ReportInputs:
    week: str
    timezone: str
    start: float
    end: float
    generated_at: float
    usage: UsageFigures | None  # None: no Prometheus configured, or it could not answer
    earlier: Sequence[WeekUsage]  # up to 7 weeks before, oldest first
    episodes: Sequence[WaitEpisode]  # overlapping [earliest week's start, end)
    preemptions: Sequence[PreemptionRecord]
    incidents: Sequence[Incident]
    history_hours: float  # hours of this week the service was recording
    entitlement: Mapping[str, TeamEntitlement]
    namespaces: Mapping[str, Sequence[str]]  # team → namespaces
    method: Method
    entitlement_mode: EntitlementMode = "auto"  # the fairness.entitlement setting
    weights: Mapping[str, float] = field(default_factory=dict)
    running: Sequence[RunningLine] = ()
    top_waiting: int = 10
    notes: Sequence[str] = ()


def preemption_events(records: Iterable[PreemptionRecord]) -> list[PreemptionRecord]:
    """Return one record per preemption of a workload: its pods' records within GANG_PREEMPTION_GAP of the
    first are one (the first stands for them)."""
    out: list[PreemptionRecord] = []
    last: dict[tuple[str, str], float] = {}
    for r in sorted(records, key=lambda r: (r.at, r.key)):
        wk = (r.victim_namespace, r.victim_workload)
        first = last.get(wk)
        if first is not None and r.at - first <= GANG_PREEMPTION_GAP:
            continue
        last[wk] = r.at
        out.append(r)
    return out


def _entitled(
    teams: Sequence[str], inp: ReportInputs, cluster: ClusterUsage | None
) -> tuple[dict[str, float | None], dict[str, EntitlementSource]]:
    """Return team → E in GPU-hours and where it came from, by the rule Grafana's live gauges use."""
    cap = cluster.capacity_gpu_hours if cluster is not None else None
    gpus = cluster.capacity_gpus if cluster is not None else None
    if cap is None or not gpus:
        return dict.fromkeys(teams), dict.fromkeys(teams, "none")
    ent = inp.entitlement
    got = entitled_gpus(
        gpus,
        teams,
        mode=inp.entitlement_mode,
        quotas={t: e.quota_gpus for t, e in ent.items() if e.quota_gpus},
        weights=inp.weights,
        kueue=[Pool(e.kueue_nominal_gpus, (t,)) for t, e in ent.items() if e.kueue_nominal_gpus],
        volcano=[Pool(e.volcano_deserved_gpus, (t,)) for t, e in ent.items() if e.volcano_deserved_gpus],
    )
    hours = cap / gpus  # the hours capacity was measured: a gap in the data shortens E as it does U
    return (
        {t: got[t][0] * hours for t in teams},
        {t: cast(EntitlementSource, got[t][1]) for t in teams},  # entitled_gpus names one
    )


def compute_report(inp: ReportInputs) -> FairnessReport:
    """Return the week's report: every team named by usage, entitlement, namespaces or history, by name."""
    start, end, usage = inp.start, inp.end, inp.usage
    # A week not over yet (the current one) has its open waits counted up to now, not to its end.
    upto = max(start, min(end, inp.generated_at))
    week_eps = [e for e in inp.episodes if e.started < end and (e.ended is None or e.ended >= start)]
    week_pre = [p for p in inp.preemptions if start <= p.at < end]
    week_inc = [i for i in inp.incidents if start <= i.started < end]
    names: set[str] = set(inp.entitlement) | set(inp.namespaces)
    names |= {e.team for e in week_eps} | {p.victim_team for p in week_pre} | {i.team for i in week_inc}
    if usage is not None:
        names |= set(usage.teams)
    names |= {p.preemptor_team for p in week_pre if p.preemptor_team}
    teams = sorted(n for n in names if n)
    cluster = usage.cluster if usage is not None else None
    entitled, source = _entitled(teams, inp, cluster)
    this = week_fairness(teams, usage, week_eps, start, upto, entitled)
    tiers = list(inp.method.critical_after)
    events = preemption_events(week_pre)
    team_reports = []
    for t in teams:
        tu = usage.teams.get(t) if usage is not None else None
        u, d, e = this.used[t], this.demand[t], entitled[t]
        shares = resource_shares(tu, usage)
        known_shares = {k: v for k, v in shares.items() if v is not None}
        mine = [ep for ep in week_eps if ep.team == t]
        suffered: dict[str, int] = defaultdict(int)
        caused: dict[str, int] = defaultdict(int)
        for_nothing: dict[str, int] = defaultdict(int)
        for p in events:
            if p.victim_team == t:
                suffered[p.victim_tier] += 1
                if p.outcome == DID_NOT_HELP:
                    for_nothing[p.victim_tier] += 1
            if p.preemptor_team == t:
                caused[p.preemptor_tier] += 1
        lost = sum(p.gpu_hours_lost or 0.0 for p in week_pre if p.victim_team == t)
        lost_for_nothing = sum(
            p.gpu_hours_lost or 0.0 for p in week_pre if p.victim_team == t and p.outcome == DID_NOT_HELP
        )
        idle = tu.idle_gpu_hours if tu is not None else None
        team_reports.append(
            TeamReport(
                team=t,
                namespaces=tuple(sorted(inp.namespaces.get(t, ()))),
                used=u,
                entitlement=e,
                entitlement_source=source[t] if e is not None else "none",
                attainment=ratio(u, e),
                borrowed=None if u is None or e is None else max(0.0, u - e),
                lent=None if d is None or e is None else max(0.0, e - d),
                demand=d,
                fair_share=this.fair[t],
                satisfaction=this.x[t],
                shares=shares,
                dominant_resource=max(known_shares, key=lambda k: known_shares[k]) if known_shares else None,
                waits=tier_waits(mine, start, upto, tiers),
                preemptions_suffered=dict(suffered),
                preemptions_caused=dict(caused),
                gpu_hours_lost=lost,
                idle_allocated=idle,
                idle_share=ratio(idle, u),
                starvation_incidents=sum(1 for i in week_inc if i.team == t and i.kind == "starvation"),
                gang_stalls=sum(1 for i in week_inc if i.team == t and i.kind == "gang_stall"),
                long_running=_long_running(inp, t, upto),
                top_waiting=top_waiting(mine, upto, inp.top_waiting),
                preemptions_for_nothing=dict(for_nothing),
                gpu_hours_lost_for_nothing=lost_for_nothing,
            )
        )
    trend = []
    for w in inp.earlier[-7:]:
        # A team busy only in an earlier week still counts in that week's index.
        week_teams = sorted(set(teams) | (set(w.usage.teams) if w.usage is not None else set()))
        wf = week_fairness(week_teams, w.usage, inp.episodes, w.start, w.end, entitled)
        trend.append(trend_point(w.week, w.usage, wf))
    trend.append(trend_point(inp.week, usage, this))
    last = trend[-2].jain if len(trend) >= 2 else None
    coverage = list(usage.coverage) if usage is not None else []
    coverage.append(SourceCoverage(HISTORY_SOURCE, inp.history_hours, (end - start) / 3600.0))
    notes = list(inp.notes)
    for c in coverage:
        if c.fraction < 1.0:
            # Rounded down, and with more digits near the whole: a partial source never reads "100 %".
            got = f"{c.hours_present:.1f}"
            if got == f"{c.hours_expected:.1f}":
                got = f"{c.hours_present:.2f}"
            notes.append(
                f"{c.name} covered {got} of {c.hours_expected:.1f} hours "
                f"({math.floor(100 * c.fraction)} %): the figures it feeds are partial"
            )
    return FairnessReport(
        week=inp.week,
        timezone=inp.timezone,
        start=start,
        end=end,
        generated_at=inp.generated_at,
        coverage=tuple(coverage),
        cluster=ClusterReport(
            capacity_gpus=cluster.capacity_gpus if cluster is not None else None,
            breakdown=gpu_hours_breakdown(usage),
            jain=this.jain,
            jain_last_week=last,
            teams_with_demand=sum(1 for d in this.demand.values() if d is not None and d > 0),
            trend=tuple(trend),
        ),
        teams=tuple(team_reports),
        method=inp.method,
        notes=tuple(notes),
    )


def _long_running(inp: ReportInputs, team: str, end: float) -> tuple[WorkloadLine, ...]:
    limit = inp.method.long_running_after
    lines = [
        WorkloadLine(r.namespace, r.workload, r.tier, r.gpus, end - r.started)
        for r in inp.running
        if r.team == team and end - r.started > limit
    ]
    return tuple(sorted(lines, key=lambda w: (-w.seconds, w.namespace, w.workload)))
