"""What the Prometheus reader gives the report for one week: aggregated on the server, never raw series.

A figure is None when its series were absent for the whole week: missing, never zero. `coverage` says how
many hours of each source were present, so a partly covered week is marked as such.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

UsagePath = Literal["rules", "subqueries"]


@dataclass(frozen=True, slots=True)
class SourceCoverage:
    name: str  # e.g. "kube-state-metrics", "dcgm-exporter", "watchtower"
    hours_present: float
    hours_expected: float

    @property
    def fraction(self) -> float:
        return 0.0 if self.hours_expected <= 0 else min(1.0, self.hours_present / self.hours_expected)


@dataclass(frozen=True, slots=True)
class TeamUsage:
    gpu_hours: float | None  # GPUs requested by the team's running pods, integrated over the week
    idle_gpu_hours: float | None  # of those, GPU-hours with DCGM utilisation under θ
    cpu_core_hours: float | None
    memory_gib_hours: float | None
    quota_gpus: float | None  # the team's ResourceQuota GPUs (hard), time-averaged over the week


@dataclass(frozen=True, slots=True)
class ClusterUsage:
    capacity_gpu_hours: float | None  # allocatable GPUs of all nodes, integrated
    allocated_gpu_hours: float | None
    idle_allocated_gpu_hours: float | None
    free_while_waiting_gpu_hours: float | None  # free GPUs while GPU work waited: Slurm's "planned"
    unavailable_gpu_hours: float | None  # GPUs on nodes not Ready or cordoned
    cpu_core_hours: float | None  # allocatable, integrated
    memory_gib_hours: float | None
    capacity_gpus: float | None  # allocatable GPUs, time-averaged


@dataclass(frozen=True, slots=True)
class UsageFigures:
    start: float
    end: float
    step: float  # the resolution the integrals were taken at, seconds
    teams: Mapping[str, TeamUsage] = field(default_factory=dict)
    cluster: ClusterUsage | None = None  # None: Prometheus had nothing for the week
    coverage: tuple[SourceCoverage, ...] = ()
    # How the figures were integrated: "rules" sums the per-step values the fairness usage recording rules
    # stored; "subqueries" evaluates the expressions at every step of the week (slow for many teams).
    path: UsagePath = "subqueries"
    recorded_hours: float = 0.0  # hours of the week the rules were evaluated at this step
    path_reason: str = ""  # why this path, in words


def usage_path_words(u: UsageFigures | None) -> str:
    """Return how the week's usage was integrated, in words, for the report's "how these are computed"."""
    if u is None:
        return "no usage from Prometheus"
    if u.path == "rules":
        how = "sums of the per-step values of the recording rules watchtower.fairness.usage.rules"
    else:
        how = "subqueries over the raw series, evaluated at every step of the week"
    return f"{how} ({u.path_reason})" if u.path_reason else how
