"""The queue: which workloads wait, for how long, why, and what they hold while they wait."""

from __future__ import annotations

import operator
import re
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from .capacity import Capacity, capacity
from .disruptions import Disruption, Preemption
from .messages import PreemptionVerdict, SchedulingDiagnosis, explain, parse_scheduling_message
from .model import Pod
from .quota import QuotaRefusal
from .state import ClusterState
from .tiers import TierPolicy
from .workloads import WorkloadKey


class WorkloadState(StrEnum):
    PENDING = "pending"  # no pod bound yet
    PARTIAL = "partial"  # some pods bound (holding GPUs), some still queued
    RUNNING = "running"
    GATED = "gated"  # held by schedulingGates: not queued yet, never alerted as waiting
    QUOTA_BLOCKED = "quota_blocked"  # the controller's pod creation is refused by a ResourceQuota


WAITING_STATES = frozenset({WorkloadState.PENDING, WorkloadState.PARTIAL, WorkloadState.QUOTA_BLOCKED})


@dataclass(frozen=True, slots=True)
class TrainingSelector:
    """Which pods are tracked: by default every pod requesting GPUs, optionally narrowed further."""

    require_gpu: bool = True
    match_labels: Mapping[str, str] = field(default_factory=dict)
    image_pattern: str = ""  # a regular expression searched in each container image

    def matches(self, pod: Pod) -> bool:
        if self.require_gpu and pod.gpus <= 0:
            return False
        for k, v in self.match_labels.items():
            if pod.labels.get(k) != v:
                return False
        if self.image_pattern:
            rx = re.compile(self.image_pattern)
            return any(rx.search(img) for img in pod.images)
        return True


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    tiers: TierPolicy
    selector: TrainingSelector = field(default_factory=TrainingSelector)
    quota_window: float = 15 * 60.0  # a refusal older than this no longer blocks (the controller gave up)
    preemption_window: float = 24 * 3600.0  # preemptions listed in a snapshot
    thrash_window: float = 3600.0  # window for "preempted N times"


@dataclass(slots=True)
class WorkloadStatus:
    """One workload as a tick sees it. Read-only by convention: each tick makes fresh ones.

    Not a frozen dataclass on purpose: a frozen 30-field record costs ~10x more to build, and a tick
    builds one per waiting workload (20,000 of them on a busy cluster)."""

    key: WorkloadKey
    team: str
    tier: str
    priority: int
    priority_class: str
    state: WorkloadState
    since: float | None  # when the current wait began
    wait_seconds: float
    warn_after: float
    critical_after: float
    gpus_requested: int
    gpus_held: int
    gpus_per_pod: int
    pods_pending: int
    pods_running: int
    pods_gated: int
    diagnosis: SchedulingDiagnosis | None
    scheduling_reason: str  # PodScheduled reason: Unschedulable, SchedulerError, SchedulingGated, ""
    preemption: PreemptionVerdict
    why: str
    nominated_node: str = ""
    oldest_pod: str = ""
    quota: QuotaRefusal | None = None
    ahead: int = 0  # waiting workloads the scheduler will consider first
    ahead_higher_tier: int = 0  # of those, the ones in a higher tier
    preemptions_recent: int = 0  # times its pods were preempted within the thrash window
    annotations: Mapping[str, str] = field(default_factory=dict)  # display notes of its oldest pod

    @property
    def namespace(self) -> str:
        return self.key.namespace

    @property
    def name(self) -> str:
        return self.key.name

    @property
    def kind(self) -> str:
        return self.key.kind

    @property
    def gang(self) -> bool:
        return self.key.gang

    @property
    def waiting(self) -> bool:
        return self.state in WAITING_STATES

    @property
    def severity(self) -> str:
        """Return "critical", "warning" or "" from the wait against the tier's thresholds."""
        if not self.waiting:
            return ""
        if self.wait_seconds >= self.critical_after:
            return "critical"
        if self.wait_seconds >= self.warn_after:
            return "warning"
        return ""


@dataclass(frozen=True, slots=True)
class Fragmentation:
    key: WorkloadKey
    gpus_requested: int  # per pod: what must fit on one node
    free_gpus_total: int
    largest_free_on_one_node: int


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    at: float
    workloads: tuple[WorkloadStatus, ...]
    capacity: Capacity
    fragmentation: tuple[Fragmentation, ...]
    preemptions: tuple[Preemption, ...]
    disruptions: tuple[Disruption, ...]
    gated_pods: int

    def waiting(self) -> list[WorkloadStatus]:
        return [w for w in self.workloads if w.waiting]

    def by_key(self, key: WorkloadKey) -> WorkloadStatus | None:
        for w in self.workloads:
            if w.key == key:
                return w
        return None


def is_gated(pod: Pod) -> bool:
    c = pod.scheduled
    return pod.scheduling_gated or (c is not None and c.status == "False" and c.reason == "SchedulingGated")


class QueueEvaluator:
    """Evaluates the queue; keeps a memo of parsed scheduler messages, which repeat across pods and ticks."""

    def __init__(self, policy: QueuePolicy, *, memo_limit: int = 50_000) -> None:
        self.policy = policy
        self._memo: dict[str, SchedulingDiagnosis] = {}
        self._memo_limit = memo_limit
        # Per workload: what its status was worked out from (pod generation, team, quota refusal, recent
        # preemptions) and the status itself. Same inputs → same status but for the wait, which is now - since.
        self._cache: dict[WorkloadKey, tuple[int, str, QuotaRefusal | None, int, WorkloadStatus]] = {}
        self._order: list[WorkloadKey] = []  # the last tick's queue order

    def diagnose(self, message: str) -> SchedulingDiagnosis:
        d = self._memo.get(message)
        if d is None:
            if len(self._memo) >= self._memo_limit:
                self._memo.clear()
            d = self._memo[message] = parse_scheduling_message(message)
        return d

    def evaluate(self, state: ClusterState, *, now: float, include_running: bool = False) -> QueueSnapshot:
        """Return the queue at `now`: waiting workloads (and running ones if asked), capacity, preemptions."""
        policy = self.policy
        cap = capacity(state.nodes, state.gpus_used)
        keys: set[WorkloadKey] = set(state.waiting_workloads)
        refusals = {
            k: q
            for k, q in state.quota_refusals.items()
            if q.last is not None and now - policy.quota_window <= q.last <= now + 60
        }
        keys.update(refusals)
        if include_running:
            keys.update(state.by_workload)
        thrash = self._thrash_counts(state.preemptions.values(), now=now)

        statuses: list[WorkloadStatus] = []
        frags: list[Fragmentation] = []
        gated_total = 0
        cache, fresh = self._cache, {}
        all_reused = True
        generation = state.workload_generation
        for key in keys:
            gen = generation.get(key, -1)
            refusal, n_thrash, team = refusals.get(key), thrash.get(key, 0), state.team_of(key.namespace)
            hit = cache.get(key)
            if (
                hit is not None
                and gen != -1  # a workload with no pods (quota-refused) reads priority classes: recompute
                and hit[0] == gen
                and hit[1] == team
                and hit[2] is refusal
                and hit[3] == n_thrash
            ):
                st: WorkloadStatus | None = _as_of(hit[4], now)
            else:
                all_reused = False
                members = state.by_workload.get(key, ())
                st = self._status(state, key, [state.pods[u] for u in members], refusal, now, thrash)
            if st is None:
                continue
            fresh[key] = (gen, team, refusal, n_thrash, st)
            gated_total += st.pods_gated
            if st.state is not WorkloadState.RUNNING or include_running:
                statuses.append(st)
            if st.state in (WorkloadState.PENDING, WorkloadState.PARTIAL) and cap.fragmented(st.gpus_per_pod):
                frags.append(Fragmentation(key, st.gpus_per_pod, cap.free_total, cap.largest_free))

        self._cache = fresh
        prev = self._order
        if all_reused and len(prev) == len(statuses):
            # Nothing changed but the clock: same workloads, same order, same positions (copied along).
            by_key = {w.key: w for w in statuses}
            if all(k in by_key for k in prev):
                statuses = [by_key[k] for k in prev]
            else:
                statuses = _with_queue_positions(statuses, policy.tiers)
        else:
            statuses = _with_queue_positions(statuses, policy.tiers)
        self._order = [w.key for w in statuses]
        horizon = now - policy.preemption_window
        preemptions = sorted(
            (p for p in state.preemptions.values() if p.at is None or p.at >= horizon),
            key=lambda p: (p.at or 0.0, p.victim_uid),
            reverse=True,
        )
        disruptions = sorted(
            (d for d in state.disruptions.values() if d.at is None or d.at >= horizon),
            key=lambda d: (d.at or 0.0, d.uid),
            reverse=True,
        )
        return QueueSnapshot(
            at=now,
            workloads=tuple(statuses),
            capacity=cap,
            fragmentation=tuple(sorted(frags, key=lambda f: f.key)),
            preemptions=tuple(preemptions),
            disruptions=tuple(disruptions),
            gated_pods=gated_total,
        )

    def status_of(self, state: ClusterState, key: WorkloadKey, *, now: float) -> WorkloadStatus | None:
        """Return one workload's status at `now`, running or not, without evaluating the whole queue.

        A tick evaluates the waiting workloads only (running ones are most of a big cluster); this answers
        for any one of them on demand. Queue positions (`ahead`) are left at zero: they belong to a tick.
        """
        refusal = state.quota_refusals.get(key)
        if refusal is not None and not (
            refusal.last is not None and now - self.policy.quota_window <= refusal.last <= now + 60
        ):
            refusal = None
        members = state.by_workload.get(key, ())
        thrash = self._thrash_counts(state.preemptions.values(), now=now)
        return self._status(
            state, key, [state.pods[u] for u in members if u in state.pods], refusal, now, thrash
        )

    def _thrash_counts(self, preemptions: Iterable[Preemption], *, now: float) -> Counter[WorkloadKey]:
        since = now - self.policy.thrash_window
        c: Counter[WorkloadKey] = Counter()
        # Pods of one gang preempted together count once: key by (workload, time rounded to a minute).
        seen: set[tuple[WorkloadKey, int]] = set()
        for p in preemptions:
            if p.victim_workload is None or p.at is None or p.at < since or p.at > now:
                continue
            mark = (p.victim_workload, int(p.at // 60))
            if mark not in seen:
                seen.add(mark)
                c[p.victim_workload] += 1
        return c

    def _status(
        self,
        state: ClusterState,
        key: WorkloadKey,
        pods: list[Pod],
        refusal: QuotaRefusal | None,
        now: float,
        thrash: Counter[WorkloadKey],
    ) -> WorkloadStatus | None:
        policy = self.policy
        if refusal is not None and pods and max(p.created for p in pods) > (refusal.last or 0.0):
            # The controller created a pod after its last refusal: that refusal is history, not a block.
            refusal = None
        tracked = [p for p in pods if not p.terminal and policy.selector.matches(p)]
        if not tracked and refusal is None:
            return None
        queued: list[Pod] = []
        gated: list[Pod] = []
        bound: list[Pod] = []
        for p in tracked:
            if p.holds_resources:
                bound.append(p)
            elif p.waiting:
                (gated if is_gated(p) else queued).append(p)

        notes: Mapping[str, str] = {}
        if tracked:
            notes = min(tracked, key=lambda p: (p.created, p.name)).annotations
            top = max(tracked, key=lambda p: p.priority)
            priority, pclass = top.priority, top.priority_class
        else:
            priority, pclass = _refusal_priority(state, refusal)
        tier = policy.tiers.tier_of(priority, pclass)

        diag: SchedulingDiagnosis | None = None
        sreason = ""
        verdict = PreemptionVerdict.UNKNOWN
        nominated = oldest_name = ""
        since: float | None = None
        if queued:
            rep = min(queued, key=lambda p: (p.created, p.name))
            since, oldest_name, nominated = rep.created, rep.name, rep.nominated_node
            c = rep.scheduled
            if c is not None and c.status == "False":
                sreason = c.reason
                diag = self.diagnose(c.message)
                verdict = diag.preemption
            if rep.preemption_policy == "Never":
                verdict = PreemptionVerdict.POLICY_NEVER
            elif rep.nominated_node:
                verdict = PreemptionVerdict.POSSIBLE
            state_ = WorkloadState.PARTIAL if bound else WorkloadState.PENDING
        elif refusal is not None:
            state_ = WorkloadState.QUOTA_BLOCKED
            since = refusal.first
            sreason = "FailedCreate"
        elif gated:
            state_ = WorkloadState.GATED
            rep = min(gated, key=lambda p: (p.created, p.name))
            since, oldest_name, sreason = rep.created, rep.name, "SchedulingGated"
        else:
            state_ = WorkloadState.RUNNING

        gpus_per_pod = max((p.gpus for p in queued), default=0)
        gpus_requested = sum(p.gpus for p in tracked)
        if state_ is WorkloadState.QUOTA_BLOCKED and refusal is not None:
            gpus_requested += refusal.gpus_requested or 0
            gpus_per_pod = refusal.gpus_requested or 0
        if state_ is WorkloadState.QUOTA_BLOCKED and refusal is not None:
            why = f"refused by ResourceQuota {refusal.quota}: {_quota_words(refusal)}"
        elif state_ is WorkloadState.GATED:
            why = "held by scheduling gates: not queued yet"
        elif diag is not None:
            why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
        elif queued:
            why = "waiting for the scheduler to try it"
        else:
            why = ""
        if state_ is WorkloadState.PARTIAL:
            why = f"gang partly placed: {len(bound)} pod(s) hold {sum(p.gpus for p in bound)} GPU(s), " + why

        return WorkloadStatus(
            key=key,
            team=state.team_of(key.namespace),
            tier=tier.name,
            priority=priority,
            priority_class=pclass,
            state=state_,
            since=since,
            wait_seconds=max(0.0, now - since)
            if since is not None and state_ is not WorkloadState.RUNNING
            else 0.0,
            warn_after=tier.warn_after,
            critical_after=tier.critical_after,
            gpus_requested=gpus_requested,
            gpus_held=sum(p.gpus for p in bound),
            gpus_per_pod=gpus_per_pod,
            pods_pending=len(queued),
            pods_running=len(bound),
            pods_gated=len(gated),
            diagnosis=diag,
            scheduling_reason=sreason,
            preemption=verdict,
            why=why,
            nominated_node=nominated,
            oldest_pod=oldest_name,
            quota=refusal if state_ is WorkloadState.QUOTA_BLOCKED else None,
            preemptions_recent=thrash.get(key, 0),
            annotations=notes,
        )


_FIELDS = operator.attrgetter(*WorkloadStatus.__dataclass_fields__)


def _as_of(w: WorkloadStatus, now: float) -> WorkloadStatus:
    """Return a copy of a status worked out at an earlier tick, with the wait as of `now`."""
    out = WorkloadStatus(*_FIELDS(w))
    if w.since is not None and w.state is not WorkloadState.RUNNING:
        out.wait_seconds = max(0.0, now - w.since)
    return out


def _refusal_priority(state: ClusterState, refusal: QuotaRefusal | None) -> tuple[int, str]:
    """A refused workload has no pods to read a priority from: fall back to the cluster default class."""
    for pc in state.priority_classes.values():
        if pc.global_default:
            return pc.value, pc.name
    return 0, ""


def _quota_words(q: QuotaRefusal) -> str:
    parts = []
    for res, want in sorted(q.requested.items()):
        parts.append(f"{res} requested {want}, used {q.used.get(res, '?')} of {q.limited.get(res, '?')}")
    return "; ".join(parts) or q.message


def _with_queue_positions(statuses: list[WorkloadStatus], tiers: TierPolicy) -> list[WorkloadStatus]:
    """Order workloads as the scheduler would (priority, then age) and count who is ahead of each."""
    order = sorted(
        statuses,
        key=lambda w: (
            tiers.rank(w.tier),
            -w.priority,
            w.since if w.since is not None else float("inf"),
            w.key,
        ),
    )
    ahead = 0
    per_tier: Counter[str] = Counter()
    for w in order:
        if w.state in (WorkloadState.PENDING, WorkloadState.PARTIAL):
            # These records were made by this tick and are not shared yet: filling them in place costs a
            # fraction of dataclasses.replace, which dominated a 20,000-workload tick.
            object.__setattr__(w, "ahead", ahead)
            object.__setattr__(w, "ahead_higher_tier", ahead - per_tier[w.tier])
            ahead += 1
            per_tier[w.tier] += 1
    return order
