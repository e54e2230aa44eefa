"""The fairness report's week from Prometheus (the FairnessMetrics port): one aggregated answer per query.

Every figure is integrated on the server (domain/promql.py's FairnessQueries, subqueries evaluated once at
the week's end), so an answer is one number per team or one for the cluster, whatever the week's length.
What "missing" means: a source with no sample in the whole week makes its figures None; a source that was
there makes a team's absent figure 0 (the team ran nothing of that kind). Coverage says how many hours of
each source were present.
"""

from __future__ import annotations

import asyncio
import logging
import math

from watchtower.adapters.prometheus import PrometheusReader
from watchtower.domain.fairness.usage import ClusterUsage, SourceCoverage, TeamUsage, UsageFigures
from watchtower.domain.gpu_usage import Sample
from watchtower.domain.promql import FairnessQueries

log = logging.getLogger(__name__)

KSM, DCGM, OWN = "kube-state-metrics", "dcgm-exporter", "watchtower"


class PrometheusFairness:
    """Reads a week's usage through `reader`; `idle_threshold` is θ (prometheus.idle_threshold), percent."""

    def __init__(self, reader: PrometheusReader, queries: FairnessQueries, *, idle_threshold: float) -> None:
        self.reader = reader
        self.queries = queries
        self.idle_threshold = idle_threshold

    async def week_usage(self, start: float, end: float, step: float) -> UsageFigures:
        """Return the usage of [start, end) at `step` resolution; raise PromReadError when Prometheus cannot
        answer, ValueError for a step longer than the window."""
        return await asyncio.to_thread(self.week_usage_sync, start, end, step)

    def week_usage_sync(self, start: float, end: float, step: float) -> UsageFigures:
        window = end - start
        if step <= 0 or window < step:
            raise ValueError(
                f"the step ({step:g} s) must be positive and no longer than the window ({window:g} s)"
            )
        exprs = week_expressions(self.queries, window, step, self.idle_threshold)
        answers = dict(zip(exprs, self.reader.query_many_sync(list(exprs.values()), at=end), strict=True))
        f = self.queries
        expected = window / 3600
        coverage = tuple(
            SourceCoverage(src, _single(answers[f"coverage:{src}"]) or 0.0, expected) for src in f.sources()
        )
        present = {c.name: c.hours_present > 0 for c in coverage}
        ksm, dcgm, own = present.get(KSM, False), present.get(DCGM, False), present.get(OWN, False)
        per_team = {k: _by_team(answers[k]) for k in ("gpu", "idle", "cpu", "memory", "quota")}
        names = sorted(set().union(*per_team.values()))

        def known(key: str, team: str, source_there: bool) -> float | None:
            got = per_team[key].get(team)
            return got if got is not None else (0.0 if source_there else None)

        teams = {
            t: TeamUsage(
                gpu_hours=known("gpu", t, ksm),
                idle_gpu_hours=known("idle", t, ksm and dcgm),
                cpu_core_hours=known("cpu", t, ksm),
                memory_gib_hours=known("memory", t, ksm),
                quota_gpus=per_team["quota"].get(t),  # no ResourceQuota is no limit, not a limit of 0
            )
            for t in names
        }

        def total(key: str, source_there: bool) -> float | None:
            got = _single(answers[key])
            return got if got is not None else (0.0 if source_there else None)

        cluster = (
            ClusterUsage(
                capacity_gpu_hours=total("capacity", ksm),
                allocated_gpu_hours=total("allocated", ksm),
                idle_allocated_gpu_hours=total("idle_allocated", dcgm),
                free_while_waiting_gpu_hours=total("free_while_waiting", own),
                unavailable_gpu_hours=total("unavailable", ksm),
                cpu_core_hours=total("cpu_capacity", ksm),
                memory_gib_hours=total("memory_capacity", ksm),
                capacity_gpus=total("capacity_gpus", ksm),
            )
            if ksm
            else None
        )
        return UsageFigures(start=start, end=end, step=step, teams=teams, cluster=cluster, coverage=coverage)


def week_expressions(f: FairnessQueries, window: float, step: float, theta: float) -> dict[str, str]:
    """Return every expression the report reads for a window of `window` s ending at its evaluation time,
    by the name its answer is read under (the backfill keeps the series these name, and only those)."""
    return {
        "gpu": f.team_gpu_hours(window, step),
        "idle": f.team_idle_gpu_hours(window, step, theta),
        "cpu": f.team_cpu_core_hours(window, step),
        "memory": f.team_memory_gib_hours(window, step),
        "quota": f.team_quota_gpus_mean(window, step),
        "capacity": f.capacity_gpu_hours(window, step),
        "capacity_gpus": f.capacity_gpus_mean(window, step),
        "allocated": f.allocated_gpu_hours(window, step),
        "idle_allocated": f.idle_allocated_gpu_hours(window, step, theta),
        "free_while_waiting": f.free_while_waiting_gpu_hours(window, step),
        "unavailable": f.unavailable_gpu_hours(window, step),
        "cpu_capacity": f.capacity_cpu_core_hours(window, step),
        "memory_capacity": f.capacity_memory_gib_hours(window, step),
        **{f"coverage:{src}": f.hours_present(src, window, step) for src in f.sources()},
    }


def _finite(samples: list[Sample]) -> list[Sample]:
    return [s for s in samples if math.isfinite(s.value)]


def _single(samples: list[Sample]) -> float | None:
    got = _finite(samples)
    return got[0].value if got else None


def _by_team(samples: list[Sample]) -> dict[str, float]:
    out: dict[str, float] = {}
    for s in _finite(samples):
        team = s.labels.get("team")
        if not team:
            log.warning("skipping a per-team answer without a team label: %.200r", s.labels)
            continue
        out[team] = out.get(team, 0.0) + s.value
    return out
