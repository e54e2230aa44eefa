"""The fairness report's week from Prometheus (the FairnessMetrics port): one aggregated answer per query.

Every figure is integrated on the server (domain/promql/fairness.py's FairnessQueries), so an answer is one number per
team or one for the cluster, whatever the week's length. Two paths, chosen per week by one cheap probe:

- rules: the recording rules watchtower.fairness.usage.rules stored each step's values; a figure is
  `sum_over_time(rec[1w]) * step / 3600`, read at the week's end plus the rules' evaluation offset. Taken
  when the rules ran at the report's step and their recorded hours cover the raw KSM hours (within a step).
- subqueries: `sum_over_time((expr)[1w:step])`, every expression evaluated again at each step: right
  whatever was recorded, but a minute for 200 teams.

How far the paths can differ: Prometheus evaluates a rule group at k·step + o, o an offset it derives from
a hash of the group's name and file, while subquery steps fall on k·step. The rules path pairs the
recorded instant k·step + o with the subquery step k·step (hence the read at end + o). Both see the same
samples, and give the same figures, when no sample lands in (k·step, k·step + o]; a sample that does
(a scrape just after a step) lets each change in the data (a pod starting or stopping, a node going down,
the edge of a scrape gap) count up to one step earlier on the rules path: at most one step of that
change's value per change. A report read before the rules ran at end + o lacks that last step.

What "missing" means: a source with no sample in the whole week makes its figures None; a source that was
there makes a team's absent figure 0 (the team ran nothing of that kind). Coverage says how many hours of
each source were present.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
from collections import defaultdict

from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.domain.fairness.usage import (
    ClusterUsage,
    SourceCoverage,
    TeamUsage,
    UsageFigures,
    UsagePath,
)
from watchtower.domain.gpu_usage import Sample
from watchtower.domain.promql.fairness import FairnessQueries

log = logging.getLogger(__name__)

KSM, DCGM, OWN = "kube-state-metrics", "dcgm-exporter", "watchtower"
# The ranges are this much shorter than the window, so that the steps (or recorded steps) read are those of (start, end] on
# Prometheus 2 (closed ranges) as on 3 (left-open): a step on `start` stands for the 5 minutes before it, the
# previous week's, and counted by Prometheus 2 it put them in both weeks (found by the joined report test,
# tests/reports/test_report_joined.py, whose two weeks are back to back). 1 ms: less than any step.
EDGE = 0.001
PIECE = 86400.0  # the subquery path's longest range (see _by_pieces)
MEANS = ("quota", "capacity_gpus")  # means over the steps present: asked per piece as a sum and a count


class PrometheusFairness:
    """Reads a week's usage through `reader`; `idle_threshold` is θ (prometheus.idle_threshold), percent.
    `use_rules` False keeps to the subquery path (to compare the two)."""

    def __init__(
        self,
        reader: PrometheusReader,
        queries: FairnessQueries,
        *,
        idle_threshold: float,
        use_rules: bool = True,
        workers: int = 2,
    ) -> None:
        self.reader = reader
        self.queries = queries
        self.idle_threshold = idle_threshold
        self.use_rules = use_rules
        self.workers = workers  # queries in flight at once on the subquery path
        self._kept: dict[tuple[str, float], list[Sample]] = {}  # keep_settled's answers

    async def week_usage(self, start: float, end: float, step: float) -> UsageFigures:
        """Return the usage of [start, end) at `step` resolution; raise PromReadError when Prometheus cannot
        answer, ValueError for a step longer than the window."""
        return await asyncio.to_thread(self.week_usage_sync, start, end, step)

    def _pieces(self, start: float, end: float, step: float) -> list[tuple[str, str, float]]:
        """Return the subquery path's queries as (answer key, expression, evaluation time), piece by piece
        in time order (see _by_pieces)."""
        f, theta = self.queries, self.idle_threshold
        cuts = [start]
        while cuts[-1] + PIECE < end:
            cuts.append(cuts[-1] + PIECE)
        cuts.append(end)
        asked: list[tuple[str, str, float]] = []
        for a, b in itertools.pairwise(cuts):
            span = b - a - EDGE
            every = week_expressions(f, span, step, theta, coverage=False)
            for key in ("allocated", "idle_allocated", *MEANS):
                every.pop(key)
            every["quota:sum"], every["quota:count"] = f.team_quota_gpus_parts(span, step)
            every["capacity_gpus:sum"], every["capacity_gpus:count"] = f.capacity_gpus_parts(span, step)
            asked.extend((key, expr, b) for key, expr in every.items())
        return asked

    def keep_settled(self, start: float, end: float, step: float, settled: float) -> int:
        """Ask now, and keep for the report of [start, end), the answers of its subquery pieces that end
        by `settled`; return how many queries are kept. For a caller that knows no sample at or before
        `settled` will be added or removed any more (the demo, whose past week is backfilled a day at a
        time): the report then asks only the rest. Asked with one query at a time, beside the caller's
        other work."""
        wanted = [(e, at) for _, e, at in self._pieces(start, end, step) if at <= settled]
        wanted = [p for p in wanted if p not in self._kept]
        for pair, samples in zip(wanted, self.reader.query_each_sync(wanted, workers=1), strict=True):
            self._kept[pair] = samples
        return self.kept

    @property
    def kept(self) -> int:
        """How many answers keep_settled holds."""
        return len(self._kept)

    def _by_pieces(self, start: float, end: float, step: float) -> dict[str, list[Sample]]:
        """The subquery path's answers, each expression integrated over pieces of at most PIECE seconds
        and the pieces added up. A subquery walks every series its selectors match anywhere in its range
        at every step, and pods come and go: the demo's week holds 69,683 series of which about 625 are
        there at any one time, and day-long pieces took its expressions from 109 s to 47 s.
        The pieces (a, b] tile (start, end], each step in exactly one, so the sums are those of one range.
        Means are the pieces' sums over their counts. Cluster-wide allocated and idle-allocated GPU-hours
        are the sums of the per-team figures (each running pod belongs to exactly one team, the
        namespace's own name when it has no team label), which saves their two slowest expressions.
        Answers keep_settled kept are not asked again."""
        asked = self._pieces(start, end, step)
        pairs = [(e, at) for _, e, at in asked]
        ask = [p for p in pairs if p not in self._kept]
        fresh = dict(zip(ask, self.reader.query_each_sync(ask, workers=self.workers), strict=True))
        got = [self._kept[p] if p in self._kept else fresh[p] for p in pairs]
        added: dict[str, dict[tuple[tuple[str, str], ...], Sample]] = {}
        for (key, _, _), samples in zip(asked, got, strict=True):
            into = added.setdefault(key, {})
            for smp in _finite(samples):
                at_key = tuple(sorted(smp.labels.items()))
                was = into.get(at_key)
                into[at_key] = smp if was is None else Sample(smp.labels, was.value + smp.value)
        out = {key: list(by.values()) for key, by in added.items() if not key.endswith((":sum", ":count"))}
        for key in MEANS:
            sums, counts = added.get(f"{key}:sum", {}), added.get(f"{key}:count", {})
            out[key] = [
                Sample(smp.labels, smp.value / counts[k].value)
                for k, smp in sums.items()
                if k in counts and counts[k].value > 0
            ]
        for team_key, cluster_key in (("gpu", "allocated"), ("idle", "idle_allocated")):
            per_team = out.get(team_key, [])
            out[cluster_key] = [Sample({}, math.fsum(s.value for s in per_team))] if per_team else []
        return out

    def week_usage_sync(self, start: float, end: float, step: float) -> UsageFigures:
        window = end - start
        if step <= 0 or window < step:
            raise ValueError(
                f"the step ({step:g} s) must be positive and no longer than the window ({window:g} s)"
            )
        f = self.queries
        span = window - EDGE
        expected = window / 3600
        # The probe: the hours the rules were evaluated at this step, when they last ran, and each source's
        # hours (KSM's are the raw hours the rules must cover). Cheap: one series, or a few node series.
        probe = {
            "recorded": f.recorded_hours(span, step),
            "last": f.last_evaluation(span, step),
            **{f"coverage:{src}": f.hours_present(src, span, step) for src in f.sources()},
        }
        found = dict(zip(probe, self.reader.query_many_sync(list(probe.values()), at=end), strict=True))
        coverage = tuple(
            SourceCoverage(src, _single(found[f"coverage:{src}"]) or 0.0, expected) for src in f.sources()
        )
        recorded = _single(found["recorded"]) or 0.0
        raw = next((c.hours_present for c in coverage if c.name == KSM), 0.0)
        last = _single(found["last"])
        path: UsagePath = "subqueries"
        if not self.use_rules:
            reason = "recording rules not used by this reader"
        elif recorded <= 0 or last is None:
            reason = f"no recording-rule series at the {step:g} s step for this week"
        elif recorded + step / 3600 < raw:
            reason = f"the rules cover {recorded:.1f} h of the {raw:.1f} h of raw data"
        else:
            path = "rules"
            reason = f"{recorded:.1f} recorded hours cover the {raw:.1f} h of raw data"
        if path == "rules":
            assert last is not None
            # The recorded instant k·step + o stands for the subquery step k·step: read at end + o.
            offset = round((last - end) % step, 3) % step
            exprs = f.recorded(span, step)
            at = end + offset
            answers = dict(zip(exprs, self.reader.query_many_sync(list(exprs.values()), at=at), strict=True))
        elif any(c.hours_present > 0 for c in coverage):
            answers = self._by_pieces(start, end, step)
        else:
            # No source has a sample in the week: every answer would be empty, and asking costs a hundred
            # queries (the earlier weeks of a new install's trend, each time a report is read).
            answers = defaultdict(list)
            reason = "no source has a sample in this week"
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
        return UsageFigures(
            start=start,
            end=end,
            step=step,
            teams=teams,
            cluster=cluster,
            coverage=coverage,
            path=path,
            recorded_hours=recorded,
            path_reason=reason,
        )


def week_expressions(
    f: FairnessQueries, window: float, step: float, theta: float, *, coverage: bool = True
) -> dict[str, str]:
    """Return every expression the report reads for a window of `window` s ending at its evaluation time,
    by the name its answer is read under (the backfill keeps the series these name, and only those);
    `coverage` False leaves out the coverage expressions (the probe asks those)."""
    got = {
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
    }
    if coverage:
        got.update({f"coverage:{src}": f.hours_present(src, window, step) for src in f.sources()})
    return got


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
