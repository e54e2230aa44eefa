"""The week's waits: percentiles by nearest rank, each tier's finished and censored waits, the GPU-hours
waited (D's part beyond usage), the longest waits of a team."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence

from .history import WaitEpisode
from .report import TierWaits, WorkloadLine


def nearest_rank(sorted_values: Sequence[float], p: float) -> float | None:
    """Return the p-th percentile by nearest rank: the ⌈p/100·n⌉-th smallest value; None when empty."""
    n = len(sorted_values)
    if n == 0:
        return None
    rank = max(1, math.ceil(p / 100.0 * n))
    return sorted_values[min(rank, n) - 1]


def _overlap(start: float, end: float, lo: float, hi: float) -> float:
    return max(0.0, min(end, hi) - max(start, lo))


def waiting_gpu_hours(episodes: Iterable[WaitEpisode], start: float, end: float) -> dict[str, float]:
    """Return team → Σ GPUs × hours of its episodes' waits within [start, end); open ones up to `end`."""
    out: dict[str, float] = defaultdict(float)
    for e in episodes:
        stop = e.ended if e.ended is not None else end
        out[e.team] += e.gpus * _overlap(e.started, stop, start, end) / 3600.0
    return dict(out)


def tier_waits(
    episodes: Sequence[WaitEpisode], start: float, end: float, tiers: Sequence[str]
) -> tuple[TierWaits, ...]:
    """Return per tier the waits that ended with the work placed in [start, end) and those still waiting."""
    finished: dict[str, list[float]] = defaultdict(list)
    censored: dict[str, list[float]] = defaultdict(list)
    for e in episodes:
        if e.ended is not None and e.ended < end:
            if e.outcome in ("scheduled", "admitted") and e.ended >= start:
                finished[e.tier].append(e.ended - e.started)
        elif e.started < end:
            censored[e.tier].append(end - e.started)
    present = set(finished) | set(censored)
    order = [t for t in tiers if t in present] + sorted(present - set(tiers))
    out = []
    for tier in order:
        f = sorted(finished.get(tier, ()))
        c = censored.get(tier, [])
        out.append(
            TierWaits(
                tier=tier,
                finished=len(f),
                p50=nearest_rank(f, 50),
                p95=nearest_rank(f, 95),
                max=f[-1] if f else None,
                censored=len(c),
                censored_oldest=max(c) if c else None,
            )
        )
    return tuple(out)


def top_waiting(episodes: Sequence[WaitEpisode], end: float, n: int) -> tuple[WorkloadLine, ...]:
    """Return the `n` longest waits of these episodes, up to `end`."""
    lines = [
        WorkloadLine(e.namespace, e.workload, e.tier, e.gpus, min(e.ended or end, end) - e.started)
        for e in episodes
    ]
    lines.sort(key=lambda w: (-w.seconds, w.namespace, w.workload))
    return tuple(lines[:n])
