"""The queue's values: the policy it is evaluated under, each workload's facts and status, one snapshot.

The evaluator (queue.py) builds them; every reader (rules, presenters, GPU usage) reads only these.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

import msgspec

from watchtower.domain.capacity import Capacity
from watchtower.domain.disruptions import Disruption, Preemption
from watchtower.domain.forms.dra.records import GpuClaim
from watchtower.domain.forms.kueue.records import SOURCE_KUEUE, KueueFacts
from watchtower.domain.forms.quota.refusals import QuotaRefusal
from watchtower.domain.messages.scheduler import PreemptionVerdict, SchedulingDiagnosis
from watchtower.domain.never import NeverStart
from watchtower.domain.patterns import Pattern, searched
from watchtower.domain.records import Pod
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.workloads import WorkloadKey


class WorkloadState(StrEnum):
    PENDING = "pending"  # no pod bound yet
    PARTIAL = "partial"  # some pods bound (holding GPUs), some still queued
    RUNNING = "running"
    GATED = "gated"  # held only by gates `queue.expected_gates` names: listed, never alerted as waiting
    QUOTA_BLOCKED = "quota_blocked"  # the controller's pod creation is refused by a ResourceQuota


WAITING_STATES = frozenset({WorkloadState.PENDING, WorkloadState.PARTIAL, WorkloadState.QUOTA_BLOCKED})


@dataclass(frozen=True, slots=True)
class TrainingSelector:
    """Which pods are tracked: those requesting GPUs (if `require_gpu`), narrowed by labels and image."""

    require_gpu: bool
    match_labels: Mapping[str, str]
    image_pattern: str  # a regular expression (RE2) searched in each container image; "" matches any

    def matches(self, pod: Pod) -> bool:
        if self.require_gpu and pod.gpus <= 0:
            return False
        for k, v in self.match_labels.items():
            if pod.labels.get(k) != v:
                return False
        if self.image_pattern:
            rx = searched(self.image_pattern)
            return any(rx.matches(img) for img in pod.images)
        return True


@dataclass(frozen=True, slots=True)
class QueuePolicy:
    """How the queue is read; every value comes from the configuration (`Settings.queue_policy`)."""

    tiers: TierPolicy
    selector: TrainingSelector
    quota_window: float  # a refusal older than this no longer blocks (the controller gave up)
    preemption_window: float  # preemptions listed in a snapshot
    thrash_window: float  # window for "preempted N times"
    # How long a preemptor has to start where its victims were before its preemption did not help.
    preemption_outcome_window: float = 600.0
    # Gates expected to hold for long (`queue.expected_gates`, each matching a whole gate name): work held
    # only by them stays GATED, listed and never alerted (forms/gated/facts.py).
    expected_gates: tuple[Pattern, ...] = ()


class WorkloadFacts(msgspec.Struct, frozen=True, gc=False):
    """What a tick knows about a workload apart from the clock: shared, unchanged, across ticks.

    A tick re-derives these only for workloads whose pods changed; the rest are reused as they are."""

    key: WorkloadKey
    team: str
    tier: str
    priority: int
    priority_class: str
    state: WorkloadState
    since: float | None  # when the current wait began
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
    preemptions_recent: int = 0  # times its pods were preempted within the thrash window
    annotations: Mapping[str, str] = msgspec.field(default_factory=dict)  # display notes of its oldest pod
    # What the wait was read from: "pods", "quota", "paddlejob", "podgroup", "volcano-podgroup".
    source: str = "pods"
    pods_expected: int = 0  # the gang's minimum or the spec's total; 0 = unknown
    pods_existing: int = 0  # of those, the pods that exist (not finished)
    group: str = ""  # the PodGroup it waits in, if any
    queue: str = ""  # the Volcano queue it waits in, if any
    gpu_claims: tuple[GpuClaim, ...] = ()  # its pods' DRA claims that ask GPUs, by claim name
    order: tuple[int, int, float, WorkloadKey] = (0, 0, 0.0, WorkloadKey("", "", ""))  # scheduler's order
    kueue: KueueFacts | None = None  # its Kueue Workload, when Kueue queues it
    # What a form adds beyond the fields above, by form name (its facts step's entry), which its
    # `workload_json` presents (forms/form.py); the forms with a field of their own above add nothing here.
    form_facts: Mapping[str, object] = msgspec.field(default_factory=dict)
    # Why it can never start as the cluster is configured (never.py); None: it may start once room frees.
    never: NeverStart | None = None
    notify: str = ""  # `watchtower.dev/notify` of its own object, else of its pods (owner notices); "": none

    @property
    def scheduler_queued(self) -> bool:
        """Its pods wait in the scheduler's queue: the work `ahead` counts. A job Kueue holds (suspended,
        no pods) or whose pods are not made yet is in no queue of the scheduler's, nor ahead of anyone."""
        return (
            self.pods_pending > 0
            and self.source != SOURCE_KUEUE
            and (self.state is WorkloadState.PENDING or self.state is WorkloadState.PARTIAL)
        )

    @property
    def position_queue(self) -> str | None:
        """Return which queue its place is in: "scheduler", "kueue" (held by Kueue, its place Kueue's), or
        None when it has a place in neither."""
        if self.scheduler_queued:
            return "scheduler"
        if self.source == SOURCE_KUEUE and self.kueue is not None and not self.kueue.admitted:
            return "kueue"
        return None

    def wait_at(self, now: float) -> float:
        if self.since is None or self.state is WorkloadState.RUNNING:
            return 0.0
        return max(0.0, now - self.since)


class WorkloadStatus(msgspec.Struct, gc=False):
    """One workload as of one tick: its facts, its wait at the tick, and its place in the queue.

    A view, not a copy: a tick on a queue of 20,000 workloads makes 20,000 of these, so each holds one
    reference to shared `WorkloadFacts` plus the three numbers that change with the clock and the order.
    Read-only by convention."""

    facts: WorkloadFacts
    wait_seconds: float
    ahead: int = 0  # waiting workloads the scheduler will consider first
    ahead_higher_tier: int = 0  # of those, the ones in a higher tier

    @property
    def key(self) -> WorkloadKey:
        return self.facts.key

    @property
    def team(self) -> str:
        return self.facts.team

    @property
    def tier(self) -> str:
        return self.facts.tier

    @property
    def priority(self) -> int:
        return self.facts.priority

    @property
    def priority_class(self) -> str:
        return self.facts.priority_class

    @property
    def state(self) -> WorkloadState:
        return self.facts.state

    @property
    def since(self) -> float | None:
        return self.facts.since

    @property
    def warn_after(self) -> float:
        return self.facts.warn_after

    @property
    def critical_after(self) -> float:
        return self.facts.critical_after

    @property
    def gpus_requested(self) -> int:
        return self.facts.gpus_requested

    @property
    def gpus_held(self) -> int:
        return self.facts.gpus_held

    @property
    def gpus_per_pod(self) -> int:
        return self.facts.gpus_per_pod

    @property
    def pods_pending(self) -> int:
        return self.facts.pods_pending

    @property
    def pods_running(self) -> int:
        return self.facts.pods_running

    @property
    def pods_gated(self) -> int:
        return self.facts.pods_gated

    @property
    def diagnosis(self) -> SchedulingDiagnosis | None:
        return self.facts.diagnosis

    @property
    def scheduling_reason(self) -> str:
        return self.facts.scheduling_reason

    @property
    def preemption(self) -> PreemptionVerdict:
        return self.facts.preemption

    @property
    def why(self) -> str:
        return self.facts.why

    @property
    def nominated_node(self) -> str:
        return self.facts.nominated_node

    @property
    def oldest_pod(self) -> str:
        return self.facts.oldest_pod

    @property
    def quota(self) -> QuotaRefusal | None:
        return self.facts.quota

    @property
    def preemptions_recent(self) -> int:
        return self.facts.preemptions_recent

    @property
    def annotations(self) -> Mapping[str, str]:
        return self.facts.annotations

    @property
    def source(self) -> str:
        return self.facts.source

    @property
    def pods_expected(self) -> int:
        return self.facts.pods_expected

    @property
    def pods_existing(self) -> int:
        return self.facts.pods_existing

    @property
    def group(self) -> str:
        return self.facts.group

    @property
    def queue(self) -> str:
        return self.facts.queue

    @property
    def kueue(self) -> KueueFacts | None:
        return self.facts.kueue

    @property
    def never(self) -> NeverStart | None:
        return self.facts.never

    @property
    def admission_wait(self) -> float | None:
        """Seconds from its Kueue Workload's creation to admission (or to the tick while not admitted);
        None when Kueue does not queue it."""
        k = self.facts.kueue
        if k is None:
            return None
        if k.admitted:
            if k.admitted_at is None or k.waiting_since is None:
                return None
            return max(0.0, k.admitted_at - k.waiting_since)
        return self.wait_seconds if self.waiting else None

    @property
    def scheduling_wait(self) -> float | None:
        """Seconds its pods have waited since admission (the rest of `wait_seconds`); None when Kueue does
        not queue it, it is not admitted yet or it does not wait."""
        k, admission = self.facts.kueue, self.admission_wait
        if k is None or not k.admitted or admission is None or not self.waiting:
            return None
        return max(0.0, self.wait_seconds - admission)

    @property
    def namespace(self) -> str:
        return self.facts.key.namespace

    @property
    def name(self) -> str:
        return self.facts.key.name

    @property
    def kind(self) -> str:
        return self.facts.key.kind

    @property
    def gang(self) -> bool:
        return self.facts.key.gang

    @property
    def waiting(self) -> bool:
        return self.facts.state in WAITING_STATES

    @property
    def severity(self) -> str:
        """Return "critical", "warning" or "" from the wait against the tier's thresholds: the severity of
        its wait alerts, of the queue JSON and of the status page."""
        f = self.facts
        if f.state not in WAITING_STATES:
            return ""
        if self.wait_seconds >= f.critical_after:
            return "critical"
        if self.wait_seconds >= f.warn_after:
            return "warning"
        return ""


@dataclass(frozen=True, slots=True)
class Fragmentation:
    key: WorkloadKey
    gpus_requested: int  # per pod: what must fit on one node
    free_gpus_total: int
    largest_free_on_one_node: int


@dataclass(frozen=True, slots=True)
class RecentPreemptions:
    """How often each workload was preempted within `window` seconds up to the snapshot (the policy's
    thrash window); the pods of a gang preempted together count once. Workloads never preempted are absent."""

    window: float
    counts: Mapping[WorkloadKey, int]


@dataclass(frozen=True, slots=True)
class QueueSnapshot:
    at: float
    workloads: tuple[WorkloadStatus, ...]
    capacity: Capacity
    fragmentation: tuple[Fragmentation, ...]
    preemptions: tuple[Preemption, ...]
    disruptions: tuple[Disruption, ...]
    gated_pods: int
    # Every workload's count, running or not: each WorkloadStatus.preemptions_recent is its entry here.
    recent_preemptions: RecentPreemptions

    def waiting(self) -> list[WorkloadStatus]:
        return [w for w in self.workloads if w.waiting]

    def by_key(self, key: WorkloadKey) -> WorkloadStatus | None:
        for w in self.workloads:
            if w.key == key:
                return w
        return None
