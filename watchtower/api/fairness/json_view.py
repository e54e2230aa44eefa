"""The fairness report as JSON: the FairnessReport's fields, times as RFC 3339, figures as numbers or null
(missing, never 0). docs/json.md ("fairness report") and schemas/fairness.py describe every key."""

from __future__ import annotations

from typing import Any

from watchtower.domain.fairness.report import (
    ClusterReport,
    FairnessReport,
    GpuHoursBreakdown,
    TeamReport,
    TierWaits,
    WorkloadLine,
)
from watchtower.domain.fairness.what_if import WhatIf
from watchtower.domain.timefmt import rfc3339


def _round(v: float | None, digits: int = 4) -> float | None:
    return None if v is None else round(v, digits)


def _waits(w: TierWaits) -> dict[str, Any]:
    return {
        "tier": w.tier,
        "finished": w.finished,
        "p50_seconds": _round(w.p50, 1),
        "p95_seconds": _round(w.p95, 1),
        "max_seconds": _round(w.max, 1),
        "censored": w.censored,
        "censored_oldest_seconds": _round(w.censored_oldest, 1),
    }


def _line(w: WorkloadLine) -> dict[str, Any]:
    return {
        "namespace": w.namespace,
        "workload": w.workload,
        "tier": w.tier,
        "gpus": w.gpus,
        "seconds": _round(w.seconds, 1),
    }


def team_dict(t: TeamReport) -> dict[str, Any]:
    return {
        "team": t.team,
        "namespaces": list(t.namespaces),
        "used_gpu_hours": _round(t.used),
        "entitlement_gpu_hours": _round(t.entitlement),
        "entitlement_source": t.entitlement_source,
        "attainment": _round(t.attainment),
        "borrowed_gpu_hours": _round(t.borrowed),
        "lent_gpu_hours": _round(t.lent),
        "demand_gpu_hours": _round(t.demand),
        "fair_share_gpu_hours": _round(t.fair_share),
        "satisfaction": _round(t.satisfaction),
        "shares": {k: _round(v) for k, v in sorted(t.shares.items())},
        "dominant_resource": t.dominant_resource,
        "waits": [_waits(w) for w in t.waits],
        "preemptions_suffered": dict(sorted(t.preemptions_suffered.items())),
        "preemptions_caused": dict(sorted(t.preemptions_caused.items())),
        "gpu_hours_lost": _round(t.gpu_hours_lost),
        "preemptions_for_nothing": dict(sorted(t.preemptions_for_nothing.items())),
        "gpu_hours_lost_for_nothing": _round(t.gpu_hours_lost_for_nothing),
        "idle_allocated_gpu_hours": _round(t.idle_allocated),
        "idle_share": _round(t.idle_share),
        "starvation_incidents": t.starvation_incidents,
        "gang_stalls": t.gang_stalls,
        "long_running": [_line(w) for w in t.long_running],
        "top_waiting": [_line(w) for w in t.top_waiting],
    }


def _breakdown(b: GpuHoursBreakdown) -> dict[str, Any]:
    return {
        "capacity": _round(b.capacity),
        "allocated_busy": _round(b.allocated_busy),
        "allocated_idle": _round(b.allocated_idle),
        "planned": _round(b.planned),
        "free_idle": _round(b.free_idle),
        "unavailable": _round(b.unavailable),
    }


def _cluster(c: ClusterReport) -> dict[str, Any]:
    return {
        "capacity_gpus": _round(c.capacity_gpus),
        "gpu_hours": _breakdown(c.breakdown),
        "jain": _round(c.jain),
        "jain_last_week": _round(c.jain_last_week),
        "teams_with_demand": c.teams_with_demand,
        "trend": [
            {
                "week": p.week,
                "jain": _round(p.jain),
                "used_gpu_hours": _round(p.used),
                "capacity_gpu_hours": _round(p.capacity),
                "idle_share": _round(p.idle_share),
            }
            for p in c.trend
        ],
    }


def estimates_list(r: FairnessReport) -> list[dict[str, Any]]:
    return [
        {
            "tier": a.tier,
            "checked": a.n,
            "within": a.within,
            "share_within": _round(a.share_within),
            "median_error": _round(a.median_abs_relative),
            "verdict": a.verdict,
        }
        for a in r.estimates
    ]


def what_if_dict(w: WhatIf | None) -> dict[str, Any] | None:
    if w is None:
        return None
    return {
        "policies": list(w.policies),
        "empty": w.empty,
        "failures": [{"policy": f.policy, "why": f.why} for f in w.failures],
        "runs": [
            {
                "name": r.name,
                "kind": r.kind,
                "jobs": r.jobs,
                "preemptions": r.preemptions,
                "gpu_hours_lost": _round(r.gpu_hours_lost),
                "jain": _round(r.jain),
            }
            for r in w.runs
        ],
        "tiers": [
            {
                "tier": t.tier,
                "runs": [
                    {
                        "run": f.run,
                        "jobs": f.jobs,
                        "p50_seconds": _round(f.p50, 1),
                        "p95_seconds": _round(f.p95, 1),
                    }
                    for f in t.runs
                ],
            }
            for t in w.tiers
        ],
        "teams": [
            {
                "team": t.team,
                "runs": [
                    {
                        "run": f.run,
                        "jobs": f.jobs,
                        "wait_mean_seconds": _round(f.wait_mean, 1),
                        "attainment": _round(f.attainment),
                        "wait_change_seconds": _round(f.wait_change, 1),
                        "attainment_change": _round(f.attainment_change),
                    }
                    for f in t.runs
                ],
            }
            for t in w.teams
        ],
    }


def report_dict(r: FairnessReport) -> dict[str, Any]:
    """Return the report as the JSON document `/api/v1/reports/fairness` and `watchtower report` print."""
    m = r.method
    return {
        "week": r.week,
        "timezone": r.timezone,
        "start": rfc3339(r.start),
        "end": rfc3339(r.end),
        "generated_at": rfc3339(r.generated_at),
        "coverage": [
            {
                "source": c.name,
                "hours_present": _round(c.hours_present, 2),
                "hours_expected": _round(c.hours_expected, 2),
                "fraction": _round(c.fraction),
            }
            for c in r.coverage
        ],
        "partial": any(c.fraction < 1.0 for c in r.coverage),
        "notes": list(r.notes),
        "cluster": _cluster(r.cluster),
        "teams": [team_dict(t) for t in r.teams],
        "what_if": what_if_dict(r.what_if),
        "estimates": estimates_list(r),
        "method": {
            "idle_threshold_percent": m.idle_threshold,
            "critical_after_seconds": dict(m.critical_after),
            "long_running_after_seconds": m.long_running_after,
            "step_seconds": m.step,
            "entitlement": m.entitlement,
            "usage_path": m.usage_path,
            "recorded_hours": m.recorded_hours,
            "percentiles": "nearest rank",
            "formulas": list(m.formulas),
        },
    }
