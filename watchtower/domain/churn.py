"""Preemption churn per tier: how many workloads thrash, and how close the worst one is to thrashing."""

from __future__ import annotations

from typing import NamedTuple

from watchtower.domain.queue_values import QueueSnapshot

from .tiers import TierPolicy
from .workloads import WorkloadKey


class ThrashByTier(NamedTuple):
    thrashing: dict[str, int]  # tier → workloads preempted at least `thrash_count` times in the window
    most_preemptions: dict[str, int]  # tier → the most preemptions of one workload in the window


def thrash_by_tier(snap: QueueSnapshot, tiers: TierPolicy, *, thrash_count: int) -> ThrashByTier:
    """Return per-tier thrash figures of the snapshot's thrash window; every tier present, 0 when calm.

    A workload's tier is its victims' (the records say it even after the workload is gone); a workload
    whose victims' priority was never seen falls under "unknown"."""
    tier_of: dict[WorkloadKey, str] = {}
    for p in snap.preemptions:
        if p.victim_workload is not None and p.victim_workload not in tier_of:
            tier = p.victim_tier(tiers)
            if tier is not None:
                tier_of[p.victim_workload] = tier
    counts = snap.recent_preemptions.counts
    # Only workloads preempted in the window need a tier, and most have one from their records: walk the
    # snapshot's tens of thousands of workloads only for the few left (victims of unseen priority).
    missing = {k for k in counts if k not in tier_of}
    if missing:
        for w in snap.workloads:
            f = w.facts
            if f.key in missing:
                tier_of.setdefault(f.key, f.tier)
    names = [t.name for t in tiers.tiers]
    thrashing = dict.fromkeys(names, 0)
    most = dict.fromkeys(names, 0)
    for key, n in counts.items():
        tier = tier_of.get(key, "unknown")
        if n >= thrash_count:
            thrashing[tier] = thrashing.get(tier, 0) + 1
        most[tier] = max(most.get(tier, 0), n)
    return ThrashByTier(thrashing, most)
