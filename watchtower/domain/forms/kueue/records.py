"""Kueue: the queue that holds a Job suspended, with no pods at all, until its quota is reserved.

A queued Job (JobSet, PaddleJob, ...) has a Kueue `Workload` owned by it (DESIGN §3.14): its conditions
say whether it waits (`QuotaReserved` False, reason and message from Kueue's scheduler), when it was
admitted, and whether it was preempted (`Preempted` True, the preemptor's uid in the message). Field and
condition names are Kueue's own (sigs.k8s.io/kueue v0.17.0 apis/kueue/v1beta2/workload_types.go,
clusterqueue_types.go, localqueue_types.go; the preemption message pkg/scheduler/preemption/preemption.go).
One small record per Kueue object; the tables that hold them are forms/kueue/tables.py.
"""

from __future__ import annotations

import re

import msgspec

from watchtower.domain.forms.dra.records import PodClaim
from watchtower.domain.records import OwnerRef

# WorkloadFacts.source while the workload waits for Kueue (no quota reserved yet).
SOURCE_KUEUE = "kueue"
# The kind a Kueue Workload goes by in the kinds table and in a preemption's preemptor_kind.
KUEUE_WORKLOAD_KIND = "KueueWorkload"

# Preempted condition reasons (workload_types.go InClusterQueueReason, ...).
PREEMPTION_REASONS = frozenset(
    {"InClusterQueue", "InCohortReclamation", "InCohortFairSharing", "InCohortReclaimWhileBorrowing"}
)
# preemptionMessage(): "Preempted to accommodate a workload (UID: <uid>, JobUID: <uid>) due to <why>;
# preemptor path: /<cohort>/<cq>; preemptee path: ...". Kueue writes "UNKNOWN" for a uid it lacks.
_PREEMPTED = re.compile(r"Preempted to accommodate a workload \(UID: ([^,\s)]+), JobUID: ([^,\s)]+)\)")
_PREEMPTOR_PATH = re.compile(r"preemptor path: (\S+?);")


class KueuePreempted(msgspec.Struct, frozen=True, gc=False):
    """A `Preempted=True` condition: why (its reason), when, and the preemptor's uid from its message."""

    reason: str
    at: float | None
    preemptor_uid: str = ""
    preemptor_path: str = ""  # "/cohort/cluster-queue" of the preemptor
    message: str = ""


class KueuePodSetClaims(msgspec.Struct, frozen=True, gc=False):
    """A pod set whose template names DRA claims (`spec.resourceClaims`): its GPUs are counted from them."""

    name: str
    count: int
    gpus_per_pod: int  # through nvidia.com/gpu
    claims: tuple[PodClaim, ...]


class KueueDraAsk(msgspec.Struct, frozen=True, gc=False):
    """The pod sets of a Workload that ask through DRA claims, and what they ask as the state counts it
    (forms/kueue/dra.py: the claims and templates are the state's): GPUs in all, the most one pod asks."""

    pod_sets: tuple[KueuePodSetClaims, ...]
    gpus: int = 0
    per_pod: int = 0


class KueueWorkload(msgspec.Struct, frozen=True, gc=False):
    """A Kueue Workload reduced to what the queue reads: where it queues, what it asks, whether admitted."""

    namespace: str
    name: str
    uid: str = ""
    created: float | None = None
    owner: OwnerRef | None = None  # its job (controller ownerReference): the workload's key
    local_queue: str = ""  # spec.queueName
    cluster_queue: str = ""  # status.admission.clusterQueue, once quota is reserved
    priority: int | None = None  # spec.priority, filled in by Kueue from the class
    priority_class: str = ""  # spec.priorityClassRef.name (v1beta2) / spec.priorityClassName (v1beta1)
    priority_class_kind: str = ""  # "WorkloadPriorityClass" or "PriorityClass"
    template_class: str = ""  # the first pod set's template spec.priorityClassName
    template_priority: int | None = None
    pods: int = 0  # the pod sets' counts, summed
    gpus: int = 0  # count × per-pod nvidia.com/gpu, summed over the pod sets
    gpus_per_pod: int = 0  # the most one pod asks
    reserved: bool = False  # QuotaReserved True
    quota_changed: float | None = None  # QuotaReserved lastTransitionTime, of either status
    admitted: bool = False  # Admitted True (quota and every admission check)
    admitted_at: float | None = None
    reason: str = ""  # of QuotaReserved: Pending, Inadmissible, AdmissionGated, Waiting, QuotaReserved
    message: str = ""
    finished: bool = False  # Finished True
    active: bool = True  # spec.active
    evicted_reason: str = ""  # Evicted True: Preempted, PodsReadyTimeout, ...
    preempted: KueuePreempted | None = None
    evictions: int = 0  # status.schedulingStats.evictions counts, summed
    pods_ready_at: float | None = None  # PodsReady True
    # One field, None for most: 20,000 Workloads without claims pay one slot, not three.
    dra: KueueDraAsk | None = None

    @property
    def gpus_asked(self) -> int:
        """Return the GPUs its pod sets ask: `nvidia.com/gpu` and DRA claims of a GPU class."""
        return self.gpus + (self.dra.gpus if self.dra is not None else 0)

    @property
    def per_pod_asked(self) -> int:
        """Return the most GPUs one of its pods asks, both ways counted."""
        return max(self.gpus_per_pod, self.dra.per_pod) if self.dra is not None else self.gpus_per_pod

    @property
    def waiting(self) -> bool:
        """Not admitted yet (or evicted and requeued) and neither finished nor deactivated."""
        return not self.reserved and not self.finished and self.active


class ClusterQueue(msgspec.Struct, frozen=True, gc=False):
    """A ClusterQueue's GPUs (nvidia.com/gpu over its flavors): nominal quota, borrowing limit, usage."""

    name: str
    cohort: str = ""  # spec.cohortName (v1beta2) / spec.cohort (v1beta1)
    nominal_gpus: int | None = None  # None: no nvidia.com/gpu in any resource group
    borrowing_limit_gpus: int | None = None  # None: unlimited (or no GPUs)
    lending_limit_gpus: int | None = None
    reserved_gpus: int = 0  # status.flavorsReservation total: quota held by reserving workloads
    used_gpus: int = 0  # status.flavorsUsage total: by admitted workloads
    borrowed_gpus: int = 0
    pending: int = 0  # status.pendingWorkloads
    admitted: int = 0  # status.admittedWorkloads
    stopped: bool = False  # spec.stopPolicy not None

    @property
    def free_nominal(self) -> int | None:
        """GPUs of its nominal quota no reserving workload holds; None when it has no GPU quota."""
        if self.nominal_gpus is None:
            return None
        return max(0, self.nominal_gpus - self.reserved_gpus)


class LocalQueue(msgspec.Struct, frozen=True, gc=False):
    """A LocalQueue: the namespace's door into a ClusterQueue."""

    namespace: str
    name: str
    cluster_queue: str = ""
    pending: int = 0
    admitted: int = 0


class WorkloadPriorityClass(msgspec.Struct, frozen=True, gc=False):
    name: str
    value: int


def preempted_by(reason: str, message: str, at: float | None) -> KueuePreempted:
    """Return a Preempted condition read: the preemptor's uid and path from Kueue's message, if it has them."""
    uid = path = ""
    m = _PREEMPTED.search(message)
    if m is not None and m.group(1) != "UNKNOWN":
        uid = m.group(1)
    p = _PREEMPTOR_PATH.search(message)
    if p is not None and p.group(1) != "UNKNOWN":
        path = p.group(1)
    return KueuePreempted(reason, at, uid, path, message)


# QuotaReserved=False reasons Kueue v0.19/v0.20 writes (apis/kueue/v1beta2/workload_types.go
# WorkloadQuotaReservedReason*; written by pkg/scheduler/scheduler.go, pkg/scheduler/flavorassigner and
# pkg/controller/core/workload_controller.go), each in Watchtower's words; `{where}` is the queue.
REASON_WORDS = {
    "WaitingForQuota": "waiting for quota in {where}",
    "ExceedsMaxQuota": "asks more than {where} can ever give",
    "NoMatchingFlavor": "no ResourceFlavor of {where} fits its pods (node selector, affinity, tolerations)",
    "TopologyPlacementFailed": "its topology request cannot be placed in {where} now",
    "WaitingForPreemptedWorkloads": "waiting for the workloads it preempted in {where} to release their quota",
    "Misconfigured": "its queue is misconfigured",
    "Suspended": "its queue is stopped",
    "PendingEvaluation": "waiting for Kueue's scheduler to evaluate it in {where}",
    "WaitingForPodsReady": "waiting for earlier admitted workloads to have all their pods ready",
}
# "insufficient unused quota for nvidia.com/gpu in flavor f, 8 more needed" (flavorassigner.go)
_MORE_NEEDED = re.compile(r"insufficient unused quota for nvidia\.com/gpu in flavor \S+, (\d+) more needed")


def kueue_why(w: KueueWorkload, cq: str) -> str:
    """Return why a Kueue-held workload waits, in words built from Kueue's reason and its own message."""
    where = f"ClusterQueue {cq}" if cq else f"LocalQueue {w.local_queue or '?'}"
    said = w.message.strip()
    if w.reason == "AdmissionGated" or w.reason == "Inadmissible":
        return f"held by Kueue, inadmissible in {where}: {said or w.reason}"
    words = REASON_WORDS.get(w.reason)
    if words is not None:
        text = f"held by Kueue: {words.format(where=where)}"
        more = _MORE_NEEDED.search(said)
        if more is not None:
            n = int(more.group(1))
            text += f", {n} GPU{'' if n == 1 else 's'} more needed"
        return f"{text} ({said})" if said else text
    if not said:
        return f"held by Kueue in {where}: waiting for quota (no pods until admitted)"
    return f"held by Kueue in {where}: {said}"


class KueueFacts(msgspec.Struct, frozen=True, gc=False):
    """What a workload's facts carry of its Kueue Workload: the JSON's `kueue` object, apart from the clock."""

    workload: str
    local_queue: str
    cluster_queue: str
    admitted: bool  # QuotaReserved True: Kueue let it in
    admitted_at: float | None
    reason: str
    message: str
    position: int | None  # 0-based, in its ClusterQueue (visibility API); None: not reachable
    evictions: int
    created: float | None
    waiting_since: float | None  # when its current wait for admission began


def waiting_since(w: KueueWorkload, condition_since: float | None) -> float | None:
    """Return when its current wait began: its creation, or when quota was last released after an eviction
    (QuotaReserved keeps its lastTransitionTime while it stays False, so that time is the requeue)."""
    if w.evictions == 0 and w.preempted is None and not w.evicted_reason:
        return w.created
    return condition_since if condition_since is not None else w.created
