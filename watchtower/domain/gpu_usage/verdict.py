"""The verdict: idle GPUs held while work of an equal or higher tier waits (rechecked while figures are stale)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from ..queue import QueueSnapshot, WorkloadStatus
from ..tiers import TierPolicy
from ..workloads import WorkloadKey
from .records import UsageView, WorkloadUsage


@dataclass(frozen=True, slots=True)
class IdleWhileWaiting:
    """Idle GPUs held by `idle` while workloads of an equal or higher tier wait."""

    idle: WorkloadUsage
    idle_tier: str
    waiting: tuple[WorkloadKey, ...]  # highest tier first, then longest wait
    highest_waiting_tier: str


def _tier_of_idle(
    w: WorkloadUsage,
    snapshot: QueueSnapshot,
    tiers: TierPolicy,
    class_priority: Mapping[str, int],
) -> str:
    st = _live_status(w.key, snapshot)
    if st is not None:
        return st.tier
    return tiers.tier_of(class_priority.get(w.priority_class, 0), w.priority_class).name


def idle_while_waiting(
    view: UsageView,
    snapshot: QueueSnapshot,
    tiers: TierPolicy,
    *,
    class_priority: Mapping[str, int] | None = None,
) -> list[IdleWhileWaiting]:
    """Return, per idle workload, the waiting workloads of an equal or higher tier; none waiting → not listed.

    An idle workload's tier comes from the live model, else from its PriorityClass; unknown → lowest tier."""
    waiting = _waiting_by_tier(snapshot, tiers)
    if not waiting:
        return []
    prio = class_priority or {}
    out: list[IdleWhileWaiting] = []
    for w in view.idle():
        tier = _tier_of_idle(w, snapshot, tiers, prio)
        v = _verdict(w, tier, waiting, tiers)
        if v is not None:
            out.append(v)
    return out


def _waiting_by_tier(snapshot: QueueSnapshot, tiers: TierPolicy) -> list[WorkloadStatus]:
    return sorted(snapshot.waiting(), key=lambda s: (tiers.rank(s.tier), -s.wait_seconds, s.key))


def _verdict(
    w: WorkloadUsage, tier: str, waiting: list[WorkloadStatus], tiers: TierPolicy
) -> IdleWhileWaiting | None:
    rank = tiers.rank(tier)
    ahead = [s for s in waiting if tiers.rank(s.tier) <= rank and s.key != w.key]
    if not ahead:
        return None
    return IdleWhileWaiting(w, tier, tuple(s.key for s in ahead), ahead[0].tier)


def _live_status(key: WorkloadKey, snapshot: QueueSnapshot) -> WorkloadStatus | None:
    st = snapshot.by_key(key)
    if st is None:
        # KSM does not say an owner's API group: a Volcano "Job" is a "VolcanoJob" in the live model.
        for cand in snapshot.workloads:
            if cand.namespace == key.namespace and cand.name == key.name:
                return cand
    return st


def recheck_while_stale(
    verdicts: Iterable[IdleWhileWaiting],
    snapshot: QueueSnapshot,
    tiers: TierPolicy,
    *,
    holders_included: bool = True,
) -> list[IdleWhileWaiting]:
    """Return the verdicts that still hold on what Kubernetes says now, while utilisation cannot be read.

    A verdict has two halves. "Its GPUs are idle" comes from Prometheus: unknown during an outage, so the
    last reading stands (an outage must not resolve the alert). "It holds GPUs while equal or higher-tier
    work waits" comes from Kubernetes, which is still watched: a workload that finished, was deleted or
    preempted holds nothing, and a queue that drained has nobody waiting, so on-call is not left with an
    alert they can see is false. With `holders_included` the snapshot carries the idle workloads' own
    statuses (a Tick's `holder_statuses`, or `evaluate(include_running=True)`) and one absent from it is gone;
    without, only the waiting side is rechecked and the holders are taken as still there."""
    waiting = _waiting_by_tier(snapshot, tiers)
    out: list[IdleWhileWaiting] = []
    for v in verdicts:
        st = _live_status(v.idle.key, snapshot)
        if st is None and not holders_included:
            tier = v.idle_tier
        elif st is None or st.gpus_held <= 0:
            continue
        else:
            tier = st.tier
        again = _verdict(v.idle, tier, waiting, tiers)
        if again is not None:
            out.append(again)
    return out
