"""Counting preemptions into the metrics once each, with their preemptor's tier when it can be known."""

from __future__ import annotations

from collections.abc import Mapping

from watchtower.domain.disruptions import Preemption
from watchtower.domain.model import Pod
from watchtower.domain.tiers import TierPolicy
from watchtower.ports import QueueMetrics


class PreemptionCounter:
    """Counts each victim once (replays after a re-list included), waiting a while for its preemptor.

    A victim's `DisruptionTarget` condition usually arrives before the scheduler's `Preempted` event that
    names the preemptor: the count waits `attribution_grace` (cluster time) for it before counting the
    preemptor's tier as "unknown".
    """

    def __init__(self, tiers: TierPolicy, metrics: QueueMetrics, *, attribution_grace: float = 120.0) -> None:
        self.tiers = tiers
        self.metrics = metrics
        self.attribution_grace = attribution_grace
        self._awaiting: dict[str, tuple[Preemption, float]] = {}
        self._counted: dict[str, float] = {}  # victim uid → when counted, so a replay never counts twice

    def seen(self, p: Preemption, *, now: float, pods: Mapping[str, Pod]) -> None:
        uid = p.victim_uid
        if uid in self._counted:
            return
        if p.preemptor_uid or p.preemptor_name:
            self._awaiting.pop(uid, None)
            self._count(p, now=now, pods=pods)
        else:
            since = self._awaiting.get(uid, (p, now))[1]
            self._awaiting[uid] = (p, since)

    def settle(self, *, now: float, latest: Mapping[str, Preemption], pods: Mapping[str, Pod]) -> None:
        """Count the victims whose preemptor is now known, or whose grace ran out."""
        for uid, (p, since) in list(self._awaiting.items()):
            cur = latest.get(uid, p)
            if cur.preemptor_uid or cur.preemptor_name or now - since >= self.attribution_grace:
                del self._awaiting[uid]
                if uid not in self._counted:
                    self._count(cur, now=now, pods=pods)

    def forget_before(self, horizon: float) -> None:
        for uid in [u for u, t in self._counted.items() if t < horizon]:
            del self._counted[uid]

    def _count(self, p: Preemption, *, now: float, pods: Mapping[str, Pod]) -> None:
        tiers = self.tiers
        victim_tier = (
            tiers.tier_of(p.victim_priority, p.victim_priority_class).name
            if p.victim_priority is not None
            else "unknown"
        )
        preemptor_tier = "unknown"
        if p.preemptor_priority is not None:
            preemptor_tier = tiers.tier_of(p.preemptor_priority).name
        else:
            pod = pods.get(p.preemptor_uid) if p.preemptor_uid else None
            if pod is not None:
                preemptor_tier = tiers.tier_of(pod.priority, pod.priority_class).name
        self.metrics.preempted(victim_tier, preemptor_tier, p.gpu_hours_lost)
        self._counted[p.victim_uid] = now
