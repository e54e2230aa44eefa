"""Synthetic traces for tests and benchmarks: Poisson arrivals with exponential run times, from a seed."""

from __future__ import annotations

import random
from collections.abc import Sequence

from .trace import TraceJob


def poisson_jobs(
    seed: int,
    count: int,
    *,
    per_hour: float,
    mean_duration: float,
    tier: str = "low",
    priority: int = 0,
    team: str = "team",
    pods: int = 1,
    gpus_per_pod: int = 1,
    start: float = 0.0,
    prefix: str = "j",
) -> list[TraceJob]:
    """Return `count` jobs arriving as a Poisson process of `per_hour`, each running an exponential time of
    mean `mean_duration` seconds; the same seed gives the same jobs."""
    rng = random.Random(seed)
    rate = per_hour / 3600.0
    t = start
    out = []
    for k in range(count):
        t += rng.expovariate(rate)
        out.append(
            TraceJob(
                id=f"{prefix}{k}",
                team=team,
                tier=tier,
                priority=priority,
                submitted=t,
                duration=rng.expovariate(1.0 / mean_duration),
                pods=pods,
                gpus_per_pod=gpus_per_pod,
            )
        )
    return out


def merged(*streams: Sequence[TraceJob]) -> list[TraceJob]:
    """Return the jobs of several streams in submission order (a stable merge: ties keep the streams' order)."""
    return sorted((j for s in streams for j in s), key=lambda j: j.submitted)
