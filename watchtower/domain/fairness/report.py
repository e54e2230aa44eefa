"""The weekly fairness report as one value: what every presenter (HTML, email, JSON, CSV, CLI) renders.

Figures that could not be computed are None (shown as "missing", never as 0). Hours are GPU-hours unless a
field says otherwise; waits are seconds.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from ..estimate_accuracy import TierAccuracy
from .usage import SourceCoverage
from .what_if import WhatIf

EntitlementSource = Literal["quota", "weight", "volcano", "kueue", "none"]


@dataclass(frozen=True, slots=True)
class TierWaits:
    """Waits of the week's episodes of one tier: finished ones give the percentiles; still-waiting ones are
    censored (counted with their age at the week's end), never dropped."""

    tier: str
    finished: int
    p50: float | None
    p95: float | None
    max: float | None
    censored: int
    censored_oldest: float | None  # age at the week's end of the oldest still-waiting episode


@dataclass(frozen=True, slots=True)
class WorkloadLine:
    """A workload named in a report list (top waiting, running longer than 72 h)."""

    namespace: str
    workload: str
    tier: str
    gpus: int
    seconds: float  # how long it waited / has run


@dataclass(frozen=True, slots=True)
class GpuHoursBreakdown:
    """Slurm-style: where the cluster's GPU-hours went. The parts add up to capacity when all are known."""

    capacity: float | None
    allocated_busy: float | None
    allocated_idle: float | None  # DCGM utilisation under θ
    planned: float | None  # free while work waited
    free_idle: float | None  # free with no demand
    unavailable: float | None  # nodes down or cordoned


@dataclass(frozen=True, slots=True)
class TeamReport:
    team: str
    namespaces: tuple[str, ...]
    used: float | None  # U
    entitlement: float | None  # E, GPU-hours
    entitlement_source: EntitlementSource
    attainment: float | None  # U / E
    borrowed: float | None  # GPU-hours used beyond E
    lent: float | None  # GPU-hours of E left to others while the team had no demand for them
    demand: float | None  # D = U + GPU-hours of waiting work
    fair_share: float | None  # F: max-min fair share of capacity over the demands
    satisfaction: float | None  # x = min(1, U / min(D, F)); None for a team with no demand
    shares: Mapping[str, float | None]  # resource ("gpu", "cpu", "memory") -> share of the cluster's capacity
    dominant_resource: str | None
    waits: tuple[TierWaits, ...]
    preemptions_suffered: Mapping[str, int]  # by victim tier
    preemptions_caused: Mapping[str, int]  # by preemptor tier
    gpu_hours_lost: float
    idle_allocated: float | None
    idle_share: float | None  # idle_allocated / used
    starvation_incidents: int
    gang_stalls: int
    long_running: tuple[WorkloadLine, ...]
    top_waiting: tuple[WorkloadLine, ...]
    # Of the preemptions suffered, those that did not help the preemptor (by victim tier), and what their
    # victims had run: work thrown away for nothing.
    preemptions_for_nothing: Mapping[str, int] = field(default_factory=dict)
    gpu_hours_lost_for_nothing: float = 0.0


@dataclass(frozen=True, slots=True)
class TrendPoint:
    week: str  # "2026-W47"
    jain: float | None
    used: float | None
    capacity: float | None
    idle_share: float | None


@dataclass(frozen=True, slots=True)
class ClusterReport:
    capacity_gpus: float | None
    breakdown: GpuHoursBreakdown
    jain: float | None  # over teams with demand, this week
    jain_last_week: float | None
    teams_with_demand: int
    trend: tuple[TrendPoint, ...]  # oldest first, this week last; up to 8


@dataclass(frozen=True, slots=True)
class Method:
    """The thresholds in force, printed in the report's "how these are computed" section."""

    idle_threshold: float  # θ, percent
    critical_after: Mapping[str, float]  # tier -> seconds: a wait past it is a starvation incident
    long_running_after: float  # seconds (72 h)
    step: float  # Prometheus integration step, seconds
    entitlement: str  # how E was found, in words
    formulas: tuple[str, ...] = ()  # the "how these are computed" lines, one formula each
    usage_path: str = ""  # how the week's usage was integrated (recording rules or subqueries), in words
    recorded_hours: float | None = None  # hours of the week the fairness usage rules recorded


@dataclass(frozen=True, slots=True)
class FairnessReport:
    week: str  # "2026-W47"
    timezone: str  # IANA name
    start: float
    end: float
    generated_at: float
    coverage: tuple[SourceCoverage, ...]
    cluster: ClusterReport
    teams: tuple[TeamReport, ...]  # by team name
    method: Method
    notes: tuple[str, ...] = field(default=())  # what is missing or partial, in words
    what_if: WhatIf | None = None  # the configured policies replayed over the week; None: none configured
    # How good the start estimates were: per tier, the estimates whose work started this week (by tier).
    estimates: tuple[TierAccuracy, ...] = ()

    def team(self, name: str) -> TeamReport | None:
        return next((t for t in self.teams if t.team == name), None)

    def for_teams(self, teams: Iterable[str]) -> FairnessReport:
        """Return the report with only `teams`' lines (teams and what-if lines); the cluster's stay whole."""
        keep = set(teams)
        return replace(
            self,
            teams=tuple(t for t in self.teams if t.team in keep),
            what_if=self.what_if.for_teams(keep) if self.what_if is not None else None,
        )
