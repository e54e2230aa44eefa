"""Compact, immutable records of the Kubernetes objects Watchtower reads.

Times are Unix epoch seconds (float). Only the fields a decision needs are kept: at 150,000 pods every
field costs memory, so a record carries what the domain reads and nothing else.

The per-pod records (Pod, Condition, OwnerRef) are frozen msgspec Structs without GC tracking: a frozen
dataclass with 24 fields took ~5 µs to build (one `object.__setattr__` per field), which alone was most of
the per-pod budget of a 150,000-pod LIST, and 150,000 tracked records made every full collection walk them.
They hold no reference cycles, so leaving them untracked is safe. Change one with `msgspec.structs.replace`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import msgspec

from watchtower.domain.forms.dra.records import PodClaim
from watchtower.domain.forms.gangs.records import GroupRef

# Condition reasons written by the scheduler on a preemption victim (DESIGN §3.6).
PREEMPTION_REASONS = frozenset({"PreemptionByScheduler", "PreemptionByKubeScheduler"})
# Other DisruptionTarget reasons: a pod that goes away for these was not preempted (DESIGN §3.7).
OTHER_DISRUPTION_REASONS = frozenset(
    {"EvictionByEvictionAPI", "DeletionByTaintManager", "DeletionByPodGC", "TerminationByKubelet"}
)
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


class Condition(msgspec.Struct, frozen=True, gc=False):
    """One pod condition as observed: status is "True", "False" or "Unknown"."""

    status: str
    reason: str = ""
    message: str = ""
    since: float | None = None  # lastTransitionTime


class OwnerRef(msgspec.Struct, frozen=True, gc=False):
    """The controller owner reference of a pod (the one with controller: true, or the only one)."""

    kind: str
    name: str
    api_version: str = ""
    uid: str = ""
    # The pod's `pod-template-hash` label, for a ReplicaSet owner: it names the Deployment. Kept here, one
    # per ReplicaSet, rather than in the pod's labels, where a value per pod template would split the
    # label sets the decoder shares among pods.
    template_hash: str = ""

    @property
    def group(self) -> str:
        return api_group(self.api_version)


class Controller(msgspec.Struct, frozen=True, gc=False):
    """A pod controller (Job, ReplicaSet, PaddleJob) reduced to the pods it would make (DESIGN §3.15).

    Work refused by a ResourceQuota has no pod to read a tier or GPUs from: its controller's template is
    all there is. One small record per controller, not the template: the pods are what is tracked.
    """

    namespace: str
    kind: str
    name: str
    uid: str = ""
    owner: OwnerRef | None = None  # its own controller: the Deployment of a ReplicaSet
    priority_class: str = ""  # spec.template.spec.priorityClassName ("": the cluster default)
    priority: int | None = None  # spec.template.spec.priority, when written into the template
    gpus_per_pod: int = 0  # the most any one of its pods asks for
    gpus: int = 0  # all the pods it wants at once, together
    pods: int = 0  # how many pods it wants at once (Job parallelism, replicas, a PaddleJob's roles)
    # A PaddleJob's own word (paddle-operator api/v1/paddlejob_types.go): it exists before its pods.
    created: float | None = None  # metadata.creationTimestamp
    phase: str = ""  # status.phase: Pending, Starting, Running, Completed, ...
    pods_reported: int = 0  # the pods its per-role status counts (pending + starting + running + ...)
    min_available: int | None = None  # spec.schedulingPolicy.minAvailable (Volcano's minMember)
    queue: str = ""  # spec.schedulingPolicy.queue (a Volcano Queue)
    # Its own `watchtower.dev/notify` annotation (owner notices), cut as a pod's is; it wins over its pods'.
    notify: str = ""


def api_group(api_version: str) -> str:
    """Return the API group of an apiVersion: "batch.volcano.sh/v1alpha1" → "batch.volcano.sh", "v1" → ""."""
    return api_version.rpartition("/")[0]


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """A reference from an event to the object it is about (involvedObject / regarding / related)."""

    kind: str = ""
    namespace: str = ""
    name: str = ""
    uid: str = ""
    api_version: str = ""  # "batch.volcano.sh/v1alpha1": tells a Volcano Job from a batch/v1 Job


class Pod(msgspec.Struct, frozen=True, gc=False):
    uid: str
    namespace: str
    name: str
    created: float
    phase: str = "Pending"
    priority: int = 0
    priority_class: str = ""
    preemption_policy: str = "PreemptLowerPriority"
    gpus: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    node: str = ""
    nominated_node: str = ""
    owner: OwnerRef | None = None
    labels: Mapping[str, str] = msgspec.field(default_factory=dict)
    # Only the annotation keys configured for display.
    annotations: Mapping[str, str] = msgspec.field(default_factory=dict)
    images: tuple[str, ...] = ()
    scheduling_gated: bool = False
    scheduled: Condition | None = None  # PodScheduled
    disruption: Condition | None = None  # DisruptionTarget
    start_time: float | None = None  # status.startTime: the kubelet took the pod
    running_since: float | None = None  # first container start
    deleted_at: float | None = None  # metadata.deletionTimestamp
    status_reason: str = ""  # status.reason, e.g. Evicted, Preempting
    scheduler: str = ""  # spec.schedulerName; "" for default-scheduler, what nearly every pod names
    group: GroupRef | None = None  # the pod group it names (upstream PodGroup, Workload, Volcano)
    claims: tuple[PodClaim, ...] = ()  # spec.resourceClaims (DRA), generated names resolved
    # Of `gpus`, those asked through claims: the state adds them (ClusterState.upsert_pod), since they
    # are read from the claim objects, not from the pod.
    dra_gpus: int = 0
    # spec.schedulingGates' names, sorted (a name the decoder found odd is left out; `scheduling_gated`
    # still says the pod is gated). Shared: a pod group's pods carry one tuple.
    gates: tuple[str, ...] = ()
    # Kueue's `kueue.x-k8s.io/pod-group-total-count` annotation: the pods its plain-pod group will have
    # (0: absent or not a number).
    group_total: int = 0
    # spec.nodeSelector as sorted (key, value) pairs, shared among the pods that select alike: a selector
    # no schedulable node's labels match makes the pod one that can never start (never.py).
    node_selector: tuple[tuple[str, str], ...] = ()
    # Its `watchtower.dev/notify` annotation (owner notices), kept apart from the display notes and cut at
    # the decoder's annotation limit; "" when absent or not read (owner notices off).
    notify: str = ""

    @property
    def terminal(self) -> bool:
        return self.phase in TERMINAL_PHASES

    @property
    def bound(self) -> bool:
        return bool(self.node)

    @property
    def holds_resources(self) -> bool:
        """Bound and not finished: a terminating pod still holds its node's resources until it is gone."""
        return bool(self.node) and self.phase not in TERMINAL_PHASES

    @property
    def waiting(self) -> bool:
        """In the scheduling queue: not bound, not finished, not being deleted."""
        return not self.node and self.phase not in TERMINAL_PHASES and self.deleted_at is None

    @property
    def scheduled_at(self) -> float | None:
        c = self.scheduled
        if c is not None and c.status == "True":
            return c.since
        return None


@dataclass(frozen=True, slots=True)
class Node:
    name: str
    gpus: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    pods: int = 0
    unschedulable: bool = False
    taints: tuple[str, ...] = ()  # "key=value:Effect"
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Namespace:
    name: str
    team: str = ""  # value of the team label, "" when absent
    # The fairness report's recipients annotation (`fairness.recipients_annotation`), as written: addresses
    # are validated where they are used, a bad one skipped and counted.
    report_to: str = ""


@dataclass(frozen=True, slots=True)
class PriorityClass:
    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"
    global_default: bool = False


@dataclass(frozen=True, slots=True)
class ResourceQuota:
    namespace: str
    name: str
    hard_gpus: int | None = None  # requests.nvidia.com/gpu
    used_gpus: int | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """A core/v1 or events.k8s.io/v1 event, reduced to what attribution needs.

    first/last: when it was first and last seen (eventTime or firstTimestamp; series.lastObservedTime or
    lastTimestamp); count: occurrences (series.count or count).
    """

    uid: str
    namespace: str
    reason: str
    message: str
    regarding: ObjectRef
    related: ObjectRef | None = None
    first: float | None = None
    last: float | None = None
    count: int = 1
    source: str = ""
    type: str = "Normal"

    @property
    def seen(self) -> float | None:
        return self.last if self.last is not None else self.first
