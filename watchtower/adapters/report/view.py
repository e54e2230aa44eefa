"""The weekly report as the words and numbers its HTML and text forms print: one place that says how a
figure is written, and that a missing figure is "missing", never 0."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from watchtower.domain.estimate_accuracy import TierAccuracy
from watchtower.domain.fairness.report import FairnessReport, TeamReport, TierWaits, WorkloadLine
from watchtower.domain.fairness.what_if import WhatIf
from watchtower.domain.timefmt import format_duration

MISSING = "missing"

# DESIGN §6, as the report's "how these are computed" section prints it.
FORMULAS = (
    ("U", "GPU-hours used: the GPUs requested by the team's running pods, integrated over the week."),
    ("E", "Entitlement, GPU-hours: the team's share of capacity ({entitlement})."),
    ("attainment", "U / E."),
    (
        "borrowed / lent",
        "GPU-hours used beyond E / GPU-hours of E left to others while the team had no demand.",
    ),
    ("D", "Demand: U + the GPU-hours of the team's waiting work."),
    ("F", "Max-min fair share of capacity over the demands D (progressive filling)."),
    ("x", "Demand-aware satisfaction: min(1, U / min(D, F)); none for a team with no demand."),
    ("Jain's index", "(Σx)² / (n·Σx²) over the n teams with demand; 1 is perfectly fair."),
    ("dominant share", "The largest of the team's GPU, CPU and memory shares of the cluster's capacity."),
    (
        "waits",
        "p50/p95/max of the week's finished waits per tier; work still waiting at the week's end is"
        " counted as censored (count and oldest age), never dropped.",
    ),
    ("GPU-hours lost", "For each preemption: the victim's GPUs × the time since it started."),
    ("idle-allocated", "GPU-hours of the team's allocated GPUs with DCGM utilisation under θ = {theta} %."),
    ("starvation", "A wait past its tier's critical threshold ({critical})."),
)


def hours(v: float | None) -> str:
    return MISSING if v is None else f"{v:,.1f}"


def pct(v: float | None) -> str:
    return MISSING if v is None else f"{100 * v:.1f} %"


def index(v: float | None) -> str:
    return MISSING if v is None else f"{v:.3f}"


def duration(v: float | None) -> str:
    return MISSING if v is None else format_duration(v, spoken=True)


def _when(t: float, tz: str) -> str:
    try:
        zone: Any = ZoneInfo(tz)
    except (KeyError, ValueError):
        zone = UTC
    return datetime.fromtimestamp(t, zone).strftime("%Y-%m-%d %H:%M %Z")


def _counts(m: Mapping[str, int]) -> str:
    return ", ".join(f"{t} {n}" for t, n in sorted(m.items()) if n) or "none"


def _waits(w: TierWaits) -> dict[str, Any]:
    return {
        "tier": w.tier,
        "finished": w.finished,
        "p50": duration(w.p50),
        "p95": duration(w.p95),
        "max": duration(w.max),
        "censored": w.censored,
        "censored_oldest": duration(w.censored_oldest) if w.censored else "",
    }


def _line(w: WorkloadLine) -> dict[str, Any]:
    return {
        "where": f"{w.namespace}/{w.workload}",
        "tier": w.tier,
        "gpus": w.gpus,
        "for": duration(w.seconds),
    }


def team_view(t: TeamReport) -> dict[str, Any]:
    return {
        "team": t.team,
        "namespaces": ", ".join(t.namespaces) or "none",
        "figures": [
            ("GPU-hours used (U)", hours(t.used)),
            ("entitlement (E)", f"{hours(t.entitlement)} ({t.entitlement_source})"),
            ("attainment U/E", pct(t.attainment)),
            ("borrowed", hours(t.borrowed)),
            ("lent", hours(t.lent)),
            ("demand (D)", hours(t.demand)),
            ("fair share (F)", hours(t.fair_share)),
            ("satisfaction x", index(t.satisfaction) if t.satisfaction is not None else "no demand"),
            ("dominant resource", t.dominant_resource or MISSING),
            *((f"{r} share", pct(v)) for r, v in sorted(t.shares.items())),
            ("preemptions suffered", _counts(t.preemptions_suffered)),
            ("preemptions caused", _counts(t.preemptions_caused)),
            ("GPU-hours lost to preemption", hours(t.gpu_hours_lost)),
            ("preemptions suffered for nothing", _counts(t.preemptions_for_nothing)),
            ("GPU-hours lost for nothing", hours(t.gpu_hours_lost_for_nothing)),
            ("idle-allocated GPU-hours", hours(t.idle_allocated)),
            ("idle-allocated share", pct(t.idle_share)),
            ("starvation incidents", str(t.starvation_incidents)),
            ("gang stalls", str(t.gang_stalls)),
        ],
        "waits": [_waits(w) for w in t.waits],
        "long_running": [_line(w) for w in t.long_running],
        "top_waiting": [_line(w) for w in t.top_waiting],
        "incomplete": t.used is None or t.entitlement is None or t.idle_allocated is None,
    }


_RUN_KIND = {
    "observed": "observed",
    "configured": "the configuration replayed (fidelity)",
    "policy": "what if",
}


def _signed_duration(v: float | None) -> str:
    if v is None:
        return MISSING
    return ("+" if v > 0 else "−" if v < 0 else "±") + format_duration(abs(v), spoken=True)


def _points(v: float | None) -> str:
    return MISSING if v is None else f"{100 * v:+.1f} pts".replace("-", "−")


def what_if_view(w: WhatIf | None) -> dict[str, Any] | None:
    """Return the "What if" section's words and figures; None when no policy is configured."""
    if w is None:
        return None
    kinds = {r.name: r.kind for r in w.runs}
    return {
        "empty": w.empty,
        "policies": ", ".join(w.policies),
        "runs": [
            {
                "name": r.name,
                "kind": _RUN_KIND[r.kind],
                "jobs": r.jobs,
                "preemptions": "" if r.preemptions is None else str(r.preemptions),
                "gpu_hours_lost": "" if r.gpu_hours_lost is None else hours(r.gpu_hours_lost),
                "jain": index(r.jain),
            }
            for r in w.runs
        ],
        "tiers": [
            {
                "tier": t.tier,
                "runs": [
                    {"run": f.run, "jobs": f.jobs, "p50": duration(f.p50), "p95": duration(f.p95)}
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
                        "wait": duration(f.wait_mean),
                        "attainment": pct(f.attainment),
                        "policy": kinds.get(f.run) == "policy",
                        "wait_change": _signed_duration(f.wait_change),
                        "attainment_change": _points(f.attainment_change),
                    }
                    for f in t.runs
                ],
            }
            for t in w.teams
        ],
        "failures": [{"policy": f.policy, "why": f.why} for f in w.failures],
    }


def estimate_view(a: TierAccuracy) -> dict[str, Any]:
    return {
        "tier": a.tier,
        "checked": a.n,
        "within": pct(a.share_within),
        "median": pct(a.median_abs_relative),
        "poor": a.poor,
        "line": a.report_line,
    }


def report_view(r: FairnessReport) -> dict[str, Any]:
    """Return the template context of a report: every figure as text, "missing" where it is None."""
    c = r.cluster
    b = c.breakdown
    partial = [s for s in r.coverage if s.fraction < 1.0]
    m = r.method
    critical = ", ".join(f"{t} {format_duration(s, spoken=True)}" for t, s in m.critical_after.items())
    return {
        "week": r.week,
        "timezone": r.timezone,
        "start": _when(r.start, r.timezone),
        "end": _when(r.end, r.timezone),
        "generated": _when(r.generated_at, r.timezone),
        "coverage": [
            {
                "name": s.name,
                "present": f"{s.hours_present:.1f}",
                "expected": f"{s.hours_expected:.1f}",
                "fraction": pct(s.fraction),
                "partial": s.fraction < 1.0,
            }
            for s in r.coverage
        ],
        "coverage_missing": not r.coverage,
        "partial": bool(partial) or not r.coverage,
        "notes": list(r.notes),
        "cluster": {
            "capacity_gpus": MISSING if c.capacity_gpus is None else f"{c.capacity_gpus:g}",
            "breakdown": [
                ("capacity", hours(b.capacity)),
                ("allocated, busy", hours(b.allocated_busy)),
                ("allocated, idle (under θ)", hours(b.allocated_idle)),
                ("free while work waited (planned)", hours(b.planned)),
                ("free, no demand", hours(b.free_idle)),
                ("nodes down or cordoned", hours(b.unavailable)),
            ],
            "jain": index(c.jain),
            "jain_last_week": index(c.jain_last_week),
            "teams_with_demand": c.teams_with_demand,
            "trend": [
                {
                    "week": p.week,
                    "jain": index(p.jain),
                    "used": hours(p.used),
                    "capacity": hours(p.capacity),
                    "idle_share": pct(p.idle_share),
                }
                for p in c.trend
            ],
        },
        "teams": [team_view(t) for t in r.teams],
        "what_if": what_if_view(r.what_if),
        "estimates": [estimate_view(a) for a in r.estimates],
        "method": {
            "theta": f"{m.idle_threshold:g}",
            "critical": critical or "none configured",
            "long_running_after": format_duration(m.long_running_after, spoken=True),
            "step": format_duration(m.step, spoken=True),
            "entitlement": m.entitlement,
            "usage_path": m.usage_path or "not recorded",
        },
        "formulas": [
            (name, text.format(entitlement=m.entitlement, theta=f"{m.idle_threshold:g}", critical=critical))
            for name, text in FORMULAS
        ],
    }
