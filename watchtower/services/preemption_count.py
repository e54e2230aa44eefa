"""Counting preemptions into the metrics once each, with their preemptor's tier and team when they can be
known, and timing each preemptor from its first victim's eviction to its own start."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from watchtower.domain.disruptions import Preemption
from watchtower.domain.preemption_outcome import Skip
from watchtower.domain.records import Pod
from watchtower.domain.tiers import TierPolicy
from watchtower.ports import QueueMetrics

log = logging.getLogger(__name__)


class PreemptionCounter:
    """Counts each victim once (replays after a re-list included), waiting a while for its preemptor.

    A victim's `DisruptionTarget` condition usually arrives before the scheduler's `Preempted` event that
    names the preemptor, and that event may arrive before the preemptor pod: the count waits
    `attribution_grace` (cluster time) for the record to carry the preemptor's priority (the cluster state
    records it from the pod) before counting the preemptor's tier as "unknown". The tier counted is the one
    the record gives, as the API and the page show it.

    A preemptor pod named by a record is timed from the earliest eviction of its victims to its first
    container start (`started`); a gang's PodGroup preemptor has no pod of its own and is not timed.
    """

    def __init__(
        self,
        tiers: TierPolicy,
        metrics: QueueMetrics,
        *,
        attribution_grace: float = 120.0,
        team_of: Callable[[str], str] = lambda namespace: namespace,
    ) -> None:
        self.tiers = tiers
        self.metrics = metrics
        self.attribution_grace = attribution_grace
        self.team_of = team_of
        self._awaiting: dict[str, tuple[Preemption, float]] = {}
        self._counted: dict[str, float] = {}  # victim uid → when counted, so a replay never counts twice
        self._preemptors: dict[str, float] = {}  # preemptor pod uid → earliest eviction of its victims

    def seen(self, p: Preemption, *, now: float) -> None:
        if p.preemptor_uid and p.preemptor_kind != "PodGroup" and p.at is not None:
            known = self._preemptors.get(p.preemptor_uid)
            if known is None or p.at < known:
                self._preemptors[p.preemptor_uid] = p.at
        uid = p.victim_uid
        if uid in self._counted:
            return
        if p.preemptor_priority is not None:
            self._awaiting.pop(uid, None)
            self._count(p, now=now)
        else:
            since = self._awaiting.get(uid, (p, now))[1]
            self._awaiting[uid] = (p, since)

    def settle(self, *, now: float, latest: Mapping[str, Preemption]) -> None:
        """Count the victims whose preemptor's tier is now known, or whose grace ran out."""
        for uid, (p, since) in list(self._awaiting.items()):
            cur = latest.get(uid, p)
            if cur.preemptor_priority is not None or now - since >= self.attribution_grace:
                del self._awaiting[uid]
                if uid not in self._counted:
                    self._count(cur, now=now)

    def started(self, pod: Pod) -> None:
        """Time `pod` if it is a preemptor whose victims were evicted before it started."""
        since = self._preemptors.pop(pod.uid, None)
        if since is None or pod.running_since is None:
            return
        tier = self.tiers.tier_of(pod.priority, pod.priority_class).name
        self.metrics.preemptor_running(tier, max(0.0, pod.running_since - since))

    def judged(self, p: Preemption) -> None:
        """Count a victim whose preemption came to an outcome (the ledger stamps each once)."""
        o = p.outcome
        if o is None:
            return
        self.metrics.preemption_judged(
            p.preemptor_tier(self.tiers) or "unknown",
            p.victim_tier(self.tiers) or "unknown",
            o.verdict,
            o.reason,
            p.gpu_hours_lost,
        )

    def unjudged(self, s: Skip) -> None:
        """Count and log a preemption record that names no preemptor it could be judged by."""
        self.metrics.preemption_unjudged(s.reason)
        log.info(
            "preemption of %s not judged (%s): preemptor %s",
            s.victim_uid,
            s.reason,
            s.preemptor or "never named",
        )

    def forget_before(self, horizon: float) -> None:
        for uid in [u for u, t in self._counted.items() if t < horizon]:
            del self._counted[uid]
        # A preemptor that never started within the horizon (deleted, or started before it was named).
        for uid in [u for u, t in self._preemptors.items() if t < horizon]:
            del self._preemptors[uid]

    def _count(self, p: Preemption, *, now: float) -> None:
        victim_tier = p.victim_tier(self.tiers) or "unknown"
        preemptor_tier = p.preemptor_tier(self.tiers) or "unknown"
        self.metrics.preempted(victim_tier, preemptor_tier, p.gpu_hours_lost)
        victim_team = self.team_of(p.victim_namespace) if p.victim_namespace else "unknown"
        preemptor_team = self.team_of(p.preemptor_namespace) if p.preemptor_namespace else "unknown"
        self.metrics.preempted_between_teams(victim_team, preemptor_team, p.gpu_hours_lost)
        self._counted[p.victim_uid] = now
