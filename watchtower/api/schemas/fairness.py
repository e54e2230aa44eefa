"""The weekly fairness report, as `api/fairness/json_view.report_dict` presents it (docs/json.md, "fairness
report"). A null figure is missing (its source had no data), never zero."""

from __future__ import annotations

from typing import Literal

from .common import Body, Number, Time


class Coverage(Body):
    source: str
    """`kube-state-metrics`, `dcgm-exporter`, ... from Prometheus; `watchtower history` for the recorded history"""
    hours_present: Number
    """hours of the week with data from the source"""
    hours_expected: Number
    """hours in the week (167 or 169 in a week with a daylight-saving change)"""
    fraction: Number
    """hours_present / hours_expected, at most 1"""


class GpuHours(Body):
    """Where the cluster's GPU-hours went (Slurm's `sreport` utilisation breakdown)."""

    capacity: Number | None
    """allocatable GPUs integrated over the week"""
    allocated_busy: Number | None
    """allocated, with DCGM utilisation at or over θ"""
    allocated_idle: Number | None
    """allocated, with DCGM utilisation under θ"""
    planned: Number | None
    """free while GPU work waited"""
    free_idle: Number | None
    """free with no demand: capacity − allocated − planned − unavailable"""
    unavailable: Number | None
    """on nodes not Ready or cordoned"""


class TrendPoint(Body):
    week: str
    """ISO week, `2026-W47`"""
    jain: Number | None
    """Jain's index over the teams with demand that week"""
    used_gpu_hours: Number | None
    """Σ U over the teams"""
    capacity_gpu_hours: Number | None
    """the week's capacity"""
    idle_share: Number | None
    """idle-allocated / allocated GPU-hours"""


class ClusterFigures(Body):
    capacity_gpus: Number | None
    """allocatable GPUs, averaged over the week"""
    gpu_hours: GpuHours
    """the breakdown of capacity"""
    jain: Number | None
    """(Σx)² / (n·Σx²) over the teams with demand"""
    jain_last_week: Number | None
    """the same for the week before"""
    teams_with_demand: int
    """n: teams with D > 0"""
    trend: list[TrendPoint]
    """up to 8 weeks, oldest first, this week last"""


class TierWaits(Body):
    tier: str
    """the tier"""
    finished: int
    """episodes that ended placed (scheduled or admitted) within the week"""
    p50_seconds: Number | None
    """median wait, nearest rank"""
    p95_seconds: Number | None
    """95th percentile wait, nearest rank"""
    max_seconds: Number | None
    """longest finished wait"""
    censored: int
    """episodes still waiting at the week's end"""
    censored_oldest_seconds: Number | None
    """age at the week's end of the oldest of them"""


class WorkloadLine(Body):
    namespace: str
    """its namespace"""
    workload: str
    """`<kind>/<name>`"""
    tier: str
    """its tier"""
    gpus: int
    """GPUs it requests"""
    seconds: Number
    """how long it waited (top waiting) or has run (long running), up to the week's end"""


class TeamFigures(Body):
    team: str
    """the team (its namespaces' team label, else the namespace)"""
    namespaces: list[str]
    """its namespaces, when the live cluster is known"""
    used_gpu_hours: Number | None
    """U"""
    entitlement_gpu_hours: Number | None
    """E"""
    entitlement_source: str
    """`kueue`, `volcano`, `quota`, `weight`, or `none` when E is unknown"""
    attainment: Number | None
    """U / E"""
    borrowed_gpu_hours: Number | None
    """max(0, U − E)"""
    lent_gpu_hours: Number | None
    """max(0, E − D)"""
    demand_gpu_hours: Number | None
    """D: U + GPU-hours of its waiting work within the week"""
    fair_share_gpu_hours: Number | None
    """F: its max-min fair share of capacity over the demands"""
    satisfaction: Number | None
    """x = min(1, U / min(D, F)); null for a team without demand"""
    shares: dict[str, Number | None]
    """`gpu`, `cpu`, `memory` → its hours over the cluster's"""
    dominant_resource: str | None
    """the resource with the largest share"""
    waits: list[TierWaits]
    """per tier it had waits in, in the tier order"""
    preemptions_suffered: dict[str, int]
    """victim tier → times its workloads were preempted"""
    preemptions_caused: dict[str, int]
    """preemptor tier → times its workloads preempted others"""
    gpu_hours_lost: Number
    """Σ GPUs × time its preempted pods had run"""
    preemptions_for_nothing: dict[str, int]
    """victim tier → of the preemptions it suffered, those whose preemptor did not start where they were"""
    gpu_hours_lost_for_nothing: Number
    """Σ GPUs × time its pods had run, preempted by preemptions that did not help"""
    idle_allocated_gpu_hours: Number | None
    """its allocated GPU-hours with DCGM utilisation under θ"""
    idle_share: Number | None
    """idle-allocated / U"""
    starvation_incidents: int
    """waits that went past their tier's critical threshold, begun within the week"""
    gang_stalls: int
    """partly placed gangs held past `alerting.rules.gang_stall_after`, begun within the week"""
    long_running: list[WorkloadLine]
    """workloads still running that had run longer than `fairness.long_running_after` at the week's end"""
    top_waiting: list[WorkloadLine]
    """its longest waits of the week, at most `fairness.top_waiting`"""


class Method(Body):
    idle_threshold_percent: Number
    """θ: DCGM utilisation under it is idle"""
    critical_after_seconds: dict[str, Number]
    """tier → the wait past which it is a starvation incident"""
    long_running_after_seconds: Number
    """the long-running threshold"""
    step_seconds: Number
    """the resolution of the Prometheus integrals"""
    entitlement: str
    """how E was found, in words"""
    usage_path: str
    """how the week's usage was integrated: sums of the fairness usage recording rules, or subqueries"""
    recorded_hours: Number | None
    """hours of the week the fairness usage recording rules recorded; null without Prometheus"""
    percentiles: str
    """`nearest rank`: the ⌈p/100·n⌉-th smallest"""
    formulas: list[str]
    """every formula, one per line"""


class WhatIfFailure(Body):
    policy: str
    """the policy's name (`as configured` for the configuration itself)"""
    why: str
    """why it could not be replayed, in words"""


class WhatIfRun(Body):
    name: str
    """`observed`, `as configured`, or the policy's `replay.what_if[].name`"""
    kind: str
    """`observed`, `configured` (the running configuration replayed: the fidelity line) or `policy`"""
    jobs: int
    """jobs in the run: those that started (observed), every recorded job (a replay)"""
    preemptions: int | None
    """preemptions in the replay; null for the observed run"""
    gpu_hours_lost: Number | None
    """work redone after preemptions; null for the observed run"""
    jain: Number | None
    """Jain's index over the teams' attainment"""


class WhatIfTierRun(Body):
    run: str
    """the run's name"""
    jobs: int
    """the tier's jobs in the run"""
    p50_seconds: Number | None
    """median wait, nearest rank"""
    p95_seconds: Number | None
    """95th percentile wait, nearest rank"""


class WhatIfTier(Body):
    tier: str
    """the tier"""
    runs: list[WhatIfTierRun]
    """one per run, in the runs' order"""


class WhatIfTeamRun(Body):
    run: str
    """the run's name"""
    jobs: int
    """the team's jobs in the run"""
    wait_mean_seconds: Number | None
    """mean wait"""
    attainment: Number | None
    """Σ GPUs·run / Σ GPUs·(run + wait)"""
    wait_change_seconds: Number | None
    """a policy's mean wait less the configuration replayed; null for the other runs"""
    attainment_change: Number | None
    """a policy's attainment less the configuration replayed; null for the other runs"""


class WhatIfTeam(Body):
    team: str
    """the team"""
    runs: list[WhatIfTeamRun]
    """one per run, in the runs' order"""


class FairnessEstimates(Body):
    """How good one tier's start estimates were over the week (docs/fairness.md, "Start estimates")."""

    tier: str
    """the tier, as `tiers[].name` names it"""
    checked: int
    """estimates whose work started this week (each wait's first estimate with a number)"""
    within: int
    """of those, within ±50 % of the actual wait from the estimate"""
    share_within: Number
    """`within` / `checked`"""
    median_error: Number
    """the median absolute relative error (0.25: a quarter of the wait)"""
    verdict: Literal["fair", "poor"]
    """`poor`: fewer than 10 checked or fewer than half within ±50 %"""


class FairnessWhatIf(Body):
    """The week's recorded jobs replayed under each policy of `replay.what_if` (docs/fairness.md)."""

    policies: list[str]
    """the configured policies' names, in the configuration's order"""
    empty: str | None
    """why there is nothing to compare, in one line (no jobs recorded for the week); null otherwise"""
    failures: list[WhatIfFailure]
    """replays that could not run: which policy and why"""
    runs: list[WhatIfRun]
    """observed, the configuration replayed, then each policy that ran"""
    tiers: list[WhatIfTier]
    """per tier, in tier order: each run's waits"""
    teams: list[WhatIfTeam]
    """per team (only the one asked for with `team=`): each run's mean wait and attainment"""


class FairnessReport(Body):
    """`/api/v1/reports/fairness`: one ISO week's fairness report, for every team or one."""

    week: str
    """ISO week, `2026-W47`"""
    timezone: str
    """IANA timezone the week is read in (`fairness.timezone`)"""
    start: Time
    """Monday 00:00 in the timezone"""
    end: Time
    """the next Monday 00:00"""
    generated_at: Time
    """when the report was computed"""
    coverage: list[Coverage]
    """hours of data per source: the first thing to read"""
    partial: bool
    """true when any source covered less than the whole week: the figures it feeds are partial"""
    notes: list[str]
    """what is missing or partial, in words"""
    cluster: ClusterFigures
    """the cluster's figures"""
    teams: list[TeamFigures]
    """by team name (only the one asked for with `team=`)"""
    what_if: FairnessWhatIf | None
    """the configured policies replayed over the week; null when `replay.what_if` names none"""
    estimates: list[FairnessEstimates]
    """per tier, how good the start estimates were for the work that started this week; empty when none
    was checked (or the store keeps none)"""
    method: Method
    """the thresholds and formulas in force"""
