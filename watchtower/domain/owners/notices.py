"""What an owner is told, from one tick's facts: a workload past its tier's warning threshold, preempted,
started after waiting past it (and, once the facts carry it, one that can never start as configured).

Never another team's workload by name: what is ahead is counted ("3 higher-tier workloads are ahead"), a
preemptor is named only when it runs in the owner's own namespace, else only its tier.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from ..capacity import Capacity
from ..disruptions import Preemption
from ..estimate import TierWaits
from ..queue_values import WorkloadFacts, WorkloadStatus
from ..timefmt import format_duration
from ..workloads import WorkloadKey

NoticeKind = Literal["threshold", "preempted", "started", "never"]
NOTICE_ALERTNAME = "OwnerNotice"


@dataclass(frozen=True, slots=True)
class Notice:
    """One thing to tell one workload's owner, once per episode (`episode` names it across restarts)."""

    kind: NoticeKind
    workload: WorkloadKey
    episode: str
    labels: Mapping[str, str]  # a silence matching these mutes the notice
    subject: str
    lines: tuple[str, ...]
    at: float
    # The notice's identity: the same notice derived again after a restart has the same one.
    ident: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        text = f"{self.kind}\x00{self.workload}\x00{self.episode}"
        object.__setattr__(self, "ident", hashlib.sha256(text.encode()).hexdigest()[:32])


@dataclass(frozen=True, slots=True)
class QuotaView:
    """The workload's namespace quota as the tick shows it, and the team's own lower-tier work within it."""

    used: int | None
    hard: int
    own_lower_tier: int = 0


def labels_of(f: WorkloadFacts, kind: NoticeKind) -> dict[str, str]:
    """Return the labels a notice carries: the workload alerts' labels, so one silence mutes both."""
    return notice_labels(
        f.key, kind, team=f.team, tier=f.tier, priority_class=f.priority_class, gpus=f.gpus_requested
    )


def notice_labels(
    k: WorkloadKey,
    kind: NoticeKind,
    *,
    team: str,
    tier: str,
    priority_class: str = "",
    gpus: int | None = None,
) -> dict[str, str]:
    out = {
        "alertname": NOTICE_ALERTNAME,
        "notice": kind,
        "namespace": k.namespace,
        "team": team,
        "workload": k.name,
        "kind": k.kind,
        "tier": tier,
    }
    if priority_class:
        out["priority_class"] = priority_class
    if gpus is not None:
        out["gpus"] = str(gpus)
    return out


def _name(k: WorkloadKey) -> str:
    return f"{k.kind} {k.namespace}/{k.name}"


def fit_words(gpus_per_pod: int, gpus: int, capacity: Capacity) -> str:
    """Return what the free GPUs would take now when the pods ask more than any node has free, else ""."""
    largest = capacity.largest_free
    if gpus_per_pod <= largest or gpus_per_pod <= 0:
        return ""
    free = [max(0, n.allocatable - n.used) if n.schedulable else 0 for n in capacity.nodes]
    words = f"asks {gpus_per_pod} GPUs on one node; the largest free block is {largest}"
    for size in range(largest, 0, -1):
        if gpus % size == 0 and sum(f // size for f in free) * size >= gpus:
            return f"{words}; {gpus // size} pods of {size} GPUs would fit now"
    return words


def threshold_notice(
    w: WorkloadStatus,
    *,
    now: float,
    waits: TierWaits | None,
    capacity: Capacity | None,
    quota: QuotaView | None,
) -> Notice | None:
    """Return the notice of a workload past its tier's warning threshold; None before it or without a start."""
    f = w.facts
    if f.since is None or w.wait_seconds < f.warn_after:
        return None
    lines = [
        f"It has waited {format_duration(w.wait_seconds, spoken=True)}; its tier ({f.tier}) warns after "
        f"{format_duration(f.warn_after, spoken=True)}."
    ]
    if f.why:
        lines.append(f"Why: {f.why}")
    est = waits.estimate(w) if waits is not None else None
    if est is not None and est.position is not None:
        lines.append(f"Position: #{est.position} among the {f.tier} work waiting.")
    higher = w.ahead_higher_tier
    if higher:
        lines.append(
            f"{higher} higher-tier workload{'s' if higher != 1 else ''} "
            f"{'are' if higher != 1 else 'is'} ahead."
        )
    if est is not None:
        lines.append(f"Start {est.text}.")
    now_words: list[str] = []
    if capacity is not None:
        fit = fit_words(f.gpus_per_pod, f.gpus_requested, capacity)
        if fit:
            now_words.append(fit)
    if quota is not None and quota.used is not None and quota.used + f.gpus_requested > quota.hard:
        own = (
            f"; {quota.own_lower_tier} of them are held by your own lower-tier work"
            if quota.own_lower_tier
            else ""
        )
        now_words.append(f"your team's quota is at {quota.used} of {quota.hard} GPUs{own}")
    k = f.kueue
    if k is not None and not k.admitted and k.message:
        where = f" in ClusterQueue {k.cluster_queue}" if k.cluster_queue else ""
        now_words.append(f"held by Kueue{where}: {k.message}")
    for words in now_words:
        lines.append(f"What would let it run now: {words}.")
    # "past its critical threshold" read as the critical severity where the tier is named critical.
    waited = format_duration(w.wait_seconds, spoken=True)
    subject = f"{_name(f.key)} has waited {waited}, past the {f.tier} tier's warning threshold"
    return Notice("threshold", f.key, f"{f.since:.0f}", labels_of(f, "threshold"), subject, tuple(lines), now)


def started_notice(f: WorkloadFacts, *, now: float) -> Notice | None:
    """Return the notice of a workload that started after waiting past its threshold; None otherwise."""
    if f.since is None or now - f.since < f.warn_after:
        return None
    waited = format_duration(now - f.since, spoken=True)
    subject = f"{_name(f.key)} started after {waited}"
    lines = (
        f"It started after {waited} (its tier, {f.tier}, warns after {format_duration(f.warn_after, spoken=True)}).",
    )
    return Notice("started", f.key, f"{f.since:.0f}", labels_of(f, "started"), subject, lines, now)


def preempted_notice(
    p: Preemption,
    *,
    team: str,
    now: float,
    waiting_again: bool,
    tier_of: Callable[[int, str], str],
) -> Notice | None:
    """Return the notice of a preemption of this workload's pods; the preemptor is named only when it is in
    the same namespace (the same team's work), else only its tier is given."""
    if p.victim_workload is None or p.at is None:
        return None
    by_tier = (
        tier_of(p.preemptor_priority, p.preemptor_priority_class) if p.preemptor_priority is not None else ""
    )
    if p.preemptor_name and p.preemptor_namespace == p.victim_namespace:
        by = f"{p.preemptor_name} of your namespace" + (f" ({by_tier} tier)" if by_tier else "")
    elif p.kueue_reason:
        by = f"Kueue ({p.kueue_reason})" + (f", for {by_tier}-tier work" if by_tier else "")
    else:
        by = f"{by_tier}-tier work of another team" if by_tier else "higher-priority work of another team"
    lines = [f"Its pod {p.victim_name} was preempted by {by}."]
    if p.victim_gpus and p.victim_started is not None and p.at > p.victim_started:
        hours = p.victim_gpus * (p.at - p.victim_started) / 3600
        lines.append(
            f"GPU-hours lost: {hours:.1f} ({p.victim_gpus} GPUs for "
            f"{format_duration(p.at - p.victim_started, spoken=True)})."
        )
    lines.append(
        "It is waiting again." if waiting_again else "It is not waiting again (not requeued yet or gone)."
    )
    subject = f"{_name(p.victim_workload)} was preempted"
    episode = f"{p.victim_uid}@{p.at:.0f}"
    victim_tier = tier_of(p.victim_priority, p.victim_priority_class) if p.victim_priority is not None else ""
    labels = notice_labels(
        p.victim_workload, "preempted", team=team, tier=victim_tier, priority_class=p.victim_priority_class
    )
    return Notice("preempted", p.victim_workload, episode, labels, subject, tuple(lines), now)


def never_start_reason(f: WorkloadFacts) -> str:
    """Return why this workload can never start as configured ("asks 32 GPUs, ClusterQueue research-cq gives
    at most 16"), "" when it may start once room frees (never.py's finding on its facts)."""
    n = f.never
    return f"asks {n.asks}, {n.limit}" if n is not None else ""


def never_notice(f: WorkloadFacts, reason: str, *, now: float) -> Notice:
    """The notice of work that can never start as configured (the held-work facts of issue 30 part 2):
    called once `WorkloadFacts` carries such a reason; one per wait."""
    subject = f"{_name(f.key)} can never start as configured"
    episode = f"{f.since:.0f}" if f.since is not None else "none"
    return Notice("never", f.key, episode, labels_of(f, "never"), subject, (reason,), now)


@dataclass(frozen=True, slots=True)
class Digest:
    """Notices held back past an owner's daily limit, sent as one message."""

    owner: str
    notices: tuple[Notice, ...]
    at: float

    @property
    def ident(self) -> str:
        h = hashlib.sha256(self.owner.encode())
        for n in sorted(x.ident for x in self.notices):
            h.update(n.encode())
        return h.hexdigest()[:32]

    @property
    def subject(self) -> str:
        return f"{len(self.notices)} notices about your workloads (daily digest)"

    @property
    def lines(self) -> tuple[str, ...]:
        return tuple(f"- {n.subject}" for n in self.notices)


@dataclass(slots=True)
class Ledger:
    """What one owner was sent lately, for the rate limits: message times (a day back) and, per workload,
    the last message's time."""

    sends: list[float] = field(default_factory=list)
    per_workload: dict[WorkloadKey, float] = field(default_factory=dict)
    held: list[Notice] = field(default_factory=list)  # for the digest


@dataclass(frozen=True, slots=True)
class Limits:
    per_workload: float = 3600.0  # at most one message per workload this often
    daily: int = 10  # messages per owner a day before the rest go into one digest
    day: float = 86400.0


Decision = Literal["send", "wait", "digest"]


def decide(ledger: Ledger, n: Notice, now: float, limits: Limits) -> Decision:
    """Return what to do with a notice now: send it, wait (its workload heard from us within the hour:
    it is tried again later), or hold it for the owner's digest (the day's limit is reached)."""
    last = ledger.per_workload.get(n.workload)
    if last is not None and now - last < limits.per_workload:
        return "wait"
    recent = [t for t in ledger.sends if now - t < limits.day]
    ledger.sends[:] = recent
    return "send" if len(recent) < limits.daily else "digest"


def record_send(ledger: Ledger, workloads: Sequence[WorkloadKey], now: float) -> None:
    ledger.sends.append(now)
    for k in workloads:
        ledger.per_workload[k] = now


def digest_due(ledger: Ledger, now: float, limits: Limits) -> bool:
    """True when held notices may go out as one digest: the owner's day has room for one message."""
    if not ledger.held:
        return False
    return len([t for t in ledger.sends if now - t < limits.day]) < limits.daily
