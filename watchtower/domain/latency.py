"""Time-to-schedule and start-up latency as distributions per tier."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from watchtower.domain.records import Pod

from .tiers import TierPolicy


@dataclass(frozen=True, slots=True)
class Distribution:
    count: int
    p50: float | None
    p95: float | None
    max: float | None
    censored: int = 0  # still waiting: their wait so far is a lower bound, not a sample

    @classmethod
    def of(cls, samples: Sequence[float], *, censored: int = 0) -> Distribution:
        if not samples:
            return cls(0, None, None, None, censored)
        s = sorted(samples)
        return cls(len(s), quantile(s, 0.5), quantile(s, 0.95), s[-1], censored)


def quantile(sorted_samples: Sequence[float], q: float) -> float:
    """Nearest-rank quantile: the smallest sample with at least q of the samples at or below it."""
    n = len(sorted_samples)
    rank = max(1, math.ceil(q * n))
    return sorted_samples[rank - 1]


@dataclass(frozen=True, slots=True)
class TierLatency:
    tier: str
    time_to_schedule: Distribution
    startup: Distribution


def latency_by_tier(pods: Iterable[Pod], tiers: TierPolicy) -> list[TierLatency]:
    """Return per-tier distributions of creation→bound and bound→first container start."""
    wait: dict[str, list[float]] = {t.name: [] for t in tiers.tiers}
    start: dict[str, list[float]] = {t.name: [] for t in tiers.tiers}
    waiting: dict[str, int] = {t.name: 0 for t in tiers.tiers}
    for p in pods:
        if p.gpus <= 0:
            continue
        tier = tiers.tier_of(p.priority, p.priority_class).name
        at = p.scheduled_at
        if at is not None:
            wait[tier].append(max(0.0, at - p.created))
            if p.running_since is not None:
                start[tier].append(max(0.0, p.running_since - at))
        elif p.waiting:
            waiting[tier] += 1
    return [
        TierLatency(
            t.name, Distribution.of(wait[t.name], censored=waiting[t.name]), Distribution.of(start[t.name])
        )
        for t in tiers.tiers
    ]
