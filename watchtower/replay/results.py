"""A replay's figures per tier and per team, as plain JSON-able data: waits (mean, p50, p95, p99, max),
preemptions, GPU-hours run and lost, the cluster's utilisation and Jain's index over the teams.

Percentiles are by nearest rank and Jain's index is the fairness report's (watchtower.domain.fairness), so a
replay's figures read like the report's. A team's x in Jain's index is its attainment: the share of its jobs'
GPU-time in the system that they spent running, Σ GPUs·run / Σ GPUs·(run + wait); 1 when nothing waited.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from watchtower.domain.fairness.shares import jain_index
from watchtower.domain.fairness.waits import nearest_rank

from .engine import JobOutcome, Replay


def wait_figures(waits: Iterable[float]) -> dict[str, float | None]:
    """Return {mean, p50, p95, p99, max} of `waits` in seconds; every figure None when there is none."""
    xs = sorted(waits)
    if not xs:
        return dict.fromkeys(("mean", "p50", "p95", "p99", "max"))
    return {
        "mean": sum(xs) / len(xs),
        "p50": nearest_rank(xs, 50),
        "p95": nearest_rank(xs, 95),
        "p99": nearest_rank(xs, 99),
        "max": xs[-1],
    }


def attainment(jobs: Iterable[JobOutcome]) -> float | None:
    """Return Σ GPUs·run / Σ GPUs·(run + wait) over jobs that ran; None when none did."""
    run = waited = 0.0
    for j in jobs:
        if j.refused is None:
            run += j.gpu_hours * 3600.0
            waited += j.gpus * j.waited
    return run / (run + waited) if run + waited > 0 else None


def _group(jobs: Sequence[JobOutcome], key: Callable[[JobOutcome], str], label: str) -> list[dict[str, Any]]:
    groups: dict[str, list[JobOutcome]] = {}
    for j in jobs:
        groups.setdefault(key(j), []).append(j)
    out = []
    for name, members in groups.items():
        ran = [j for j in members if j.refused is None]
        out.append(
            {
                label: name,
                "jobs": len(members),
                "refused": len(members) - len(ran),
                "never_started": sum(1 for j in ran if j.started is None),
                "wait_seconds": wait_figures(j.waited for j in ran),
                "preemptions": sum(j.preemptions for j in ran),
                "preempted_jobs": sum(1 for j in ran if j.preemptions),
                "gpu_hours": sum(j.gpu_hours for j in ran),
                "gpu_hours_lost": sum(j.gpu_hours_lost for j in ran),
                "attainment": attainment(ran),
            }
        )
    return out


def summarise(run: Replay, tier_order: Sequence[str] = ()) -> dict[str, Any]:
    """Return the replay's figures: `{"policy", "jobs", "refused", "utilisation", "jain_index", "tiers": [...],
    "teams": [...], "refusals": [...]}`; tiers in `tier_order` (the policy's, highest first), teams by name."""
    rank = {t: i for i, t in enumerate(tier_order)}
    tiers = sorted(
        _group(run.jobs, lambda j: j.tier, "tier"), key=lambda g: (rank.get(g["tier"], len(rank)), g["tier"])
    )
    teams = sorted(_group(run.jobs, lambda j: j.team, "team"), key=lambda g: g["team"])
    return {
        "policy": run.policy,
        "jobs": len(run.jobs),
        "refused": sum(1 for j in run.jobs if j.refused is not None),
        "capacity_gpus": run.capacity_gpus,
        "span_seconds": run.end - run.start,
        "utilisation": run.utilisation,
        "gpu_hours_lost": sum(j.gpu_hours_lost for j in run.jobs),
        "preemptions": sum(j.preemptions for j in run.jobs),
        "jain_index": jain_index({t["team"]: t["attainment"] for t in teams}),
        "tiers": tiers,
        "teams": teams,
        "refusals": [{"id": j.id, "reason": j.refused} for j in run.jobs if j.refused is not None],
    }
