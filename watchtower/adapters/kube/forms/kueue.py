"""The Kueue form, wire → domain: Workload, ClusterQueue, LocalQueue, WorkloadPriorityClass, pending workloads.

The field names are Kueue's (sigs.k8s.io/kueue v0.17.0 apis/kueue/v1beta2 and v1beta1 workload_types.go,
clusterqueue_types.go, localqueue_types.go, workloadpriorityclass_types.go; apis/visibility/v1beta2
types.go). Both versions are read by one struct: v1beta2 renamed spec.priorityClassName/priorityClassSource
to spec.priorityClassRef {group, kind, name} and ClusterQueue spec.cohort to spec.cohortName. Each raises
DecodeError for an object the domain cannot use.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from watchtower.domain import kinds
from watchtower.domain.forms.kueue.records import (
    ClusterQueue,
    KueueDraAsk,
    KueuePodSetClaims,
    KueuePreempted,
    KueueWorkload,
    LocalQueue,
    WorkloadPriorityClass,
    preempted_by,
)
from watchtower.domain.records import OwnerRef
from watchtower.ports import DecodeError

from .. import wire
from ..quantities import GPU, ceil_int, parse_quantity
from ..reading import KindReader, Reading, parse_time, reader
from ..wire import Qty
from .dra import pod_claims

Times = Callable[[str | None], float | None]
Sums = Callable[[wire.PodSpec], tuple[int, int, int]]
Share = Callable[[str], str]  # one object per distinct value: 20,000 Workloads repeat a few hundred

# v1beta1 spec.priorityClassSource values (apis/kueue/constants.go).
_WORKLOAD_PRIORITY_SOURCE = "kueue.x-k8s.io/workloadpriorityclass"


class PriorityClassRef(msgspec.Struct, gc=False):
    group: str | None = None
    kind: str | None = None
    name: str | None = None


class PodSet(msgspec.Struct, gc=False):
    name: str | None = None
    count: int | None = None
    template: wire.Template | None = None


class WorkloadSpec(msgspec.Struct, gc=False):
    podSets: list[PodSet] | None = None
    queueName: str | None = None
    priority: int | None = None
    priorityClassRef: PriorityClassRef | None = None  # v1beta2
    priorityClassName: str | None = None  # v1beta1
    priorityClassSource: str | None = None  # v1beta1
    active: bool | None = None


class Admission(msgspec.Struct, gc=False):
    clusterQueue: str | None = None


class Eviction(msgspec.Struct, gc=False):
    reason: str | None = None
    count: int | None = None


class SchedulingStats(msgspec.Struct, gc=False):
    evictions: list[Eviction] | None = None


class WorkloadStatus(msgspec.Struct, gc=False):
    conditions: list[wire.Cond] | None = None
    admission: Admission | None = None
    schedulingStats: SchedulingStats | None = None


class Workload(msgspec.Struct, gc=False):
    metadata: wire.ControllerMeta | None = None
    spec: WorkloadSpec | None = None
    status: WorkloadStatus | None = None


class ResourceQuota(msgspec.Struct, gc=False):
    name: str | None = None
    nominalQuota: Qty | None = None
    borrowingLimit: Qty | None = None
    lendingLimit: Qty | None = None


class FlavorQuotas(msgspec.Struct, gc=False):
    name: str | None = None
    resources: list[ResourceQuota] | None = None


class ResourceGroup(msgspec.Struct, gc=False):
    flavors: list[FlavorQuotas] | None = None


class ClusterQueueSpec(msgspec.Struct, gc=False):
    resourceGroups: list[ResourceGroup] | None = None
    cohortName: str | None = None  # v1beta2
    cohort: str | None = None  # v1beta1
    stopPolicy: str | None = None


class ResourceUsage(msgspec.Struct, gc=False):
    name: str | None = None
    total: Qty | None = None
    borrowed: Qty | None = None


class FlavorUsage(msgspec.Struct, gc=False):
    name: str | None = None
    resources: list[ResourceUsage] | None = None


class QueueStatus(msgspec.Struct, gc=False):
    flavorsReservation: list[FlavorUsage] | None = None
    flavorsUsage: list[FlavorUsage] | None = None
    pendingWorkloads: int | None = None
    admittedWorkloads: int | None = None


class ClusterQueueObj(msgspec.Struct, gc=False):
    metadata: wire.ControllerMeta | None = None
    spec: ClusterQueueSpec | None = None
    status: QueueStatus | None = None


class LocalQueueSpec(msgspec.Struct, gc=False):
    clusterQueue: str | None = None


class LocalQueueObj(msgspec.Struct, gc=False):
    metadata: wire.ControllerMeta | None = None
    spec: LocalQueueSpec | None = None
    status: QueueStatus | None = None


class PriorityClassObj(msgspec.Struct, gc=False):
    metadata: wire.ControllerMeta | None = None
    value: int | None = None


class PendingWorkload(msgspec.Struct, gc=False):
    metadata: wire.ControllerMeta | None = None
    positionInClusterQueue: int | None = None
    localQueueName: str | None = None


class PendingWorkloads(msgspec.Struct, gc=False):
    """visibility.kueue.x-k8s.io PendingWorkloadsSummary: a ClusterQueue's pending Workloads, in order."""

    items: list[PendingWorkload] | None = None


def _named(meta: wire.ControllerMeta | None, kind: str, *, namespaced: bool) -> wire.ControllerMeta:
    if meta is None or not meta.name:
        raise DecodeError(f"{kind} without a name", kind=kind, uid=(meta.uid or "") if meta else "")
    if namespaced and not meta.namespace:
        raise DecodeError(f"{kind} {meta.name!r} without a namespace", kind=kind, uid=meta.uid or "")
    return meta


def _gpus(q: Qty | None) -> int:
    return ceil_int(parse_quantity(q)) if q is not None else 0


def _same(s: str) -> str:
    return s


def workload(w: Workload, times: Times, sums: Sums, share: Share = _same) -> KueueWorkload:
    """Return a Kueue Workload: its queue, pod sets' GPUs, priority and the conditions that say it waits.

    Repeated words (namespace, queues, classes, Kueue's messages) are `share`d; the owner's uid is not
    kept (its kind and name are the workload's key)."""
    m = _named(w.metadata, "KueueWorkload", namespaced=True)
    spec = w.spec or WorkloadSpec()
    st = w.status or WorkloadStatus()
    owner = None
    for o in m.ownerReferences or ():
        if o.controller:
            owner = OwnerRef(share(o.kind), o.name, share(o.apiVersion))
    pods = gpus = per_pod = 0
    tclass, tprio = "", None
    with_claims: list[KueuePodSetClaims] = []
    for i, ps in enumerate(spec.podSets or ()):
        count = ps.count if ps.count is not None else 1
        if count < 0:
            raise DecodeError(f"KueueWorkload {m.name!r}: negative pod set count", kind="KueueWorkload")
        tspec = (ps.template.spec if ps.template is not None else None) or wire.PodSpec()
        g = sums(tspec)[0]
        pods += count
        gpus += count * g
        per_pod = max(per_pod, g)
        if tspec.resourceClaims:  # GPUs through DRA: counted by the state, which holds the templates
            claims = pod_claims(tspec.resourceClaims, None)
            with_claims.append(KueuePodSetClaims(share(ps.name or ""), count, g, claims))
        if i == 0:
            tclass, tprio = tspec.priorityClassName or "", tspec.priority
    ref = spec.priorityClassRef
    if ref is not None:
        pclass, pkind = ref.name or "", ref.kind or ""
    else:
        pclass = spec.priorityClassName or ""
        src = spec.priorityClassSource or ""
        pkind = (
            "WorkloadPriorityClass" if src == _WORKLOAD_PRIORITY_SOURCE else "PriorityClass" if src else ""
        )
    reserved = admitted = finished = False
    reason = message = evicted = ""
    quota_changed = admitted_at = ready_at = None
    preempted: KueuePreempted | None = None
    for c in st.conditions or ():
        true = c.status == "True"
        if c.type == "QuotaReserved":
            reserved, reason, message = true, c.reason or "", c.message or ""
            quota_changed = times(c.lastTransitionTime)
        elif c.type == "Admitted":
            admitted = true
            admitted_at = times(c.lastTransitionTime) if true else None
        elif c.type == "Finished":
            finished = true
        elif c.type == "Evicted" and true:
            evicted = c.reason or ""
        elif c.type == "Preempted" and true:
            preempted = preempted_by(c.reason or "", c.message or "", times(c.lastTransitionTime))
        elif c.type == "PodsReady" and true:
            ready_at = times(c.lastTransitionTime)
    evictions = 0
    for e in (st.schedulingStats.evictions if st.schedulingStats is not None else None) or ():
        evictions += max(0, e.count or 0)
    return KueueWorkload(
        share(m.namespace or ""),
        m.name or "",
        m.uid or "",
        times(m.creationTimestamp),
        owner,
        share(spec.queueName or ""),
        share((st.admission.clusterQueue or "") if st.admission is not None else ""),
        spec.priority,
        share(pclass),
        share(pkind),
        share(tclass),
        tprio,
        pods,
        gpus,
        per_pod,
        reserved,
        quota_changed,
        admitted,
        admitted_at,
        share(reason),
        share(message),
        finished,
        spec.active is not False,
        evicted,
        preempted,
        evictions,
        ready_at,
        KueueDraAsk(tuple(with_claims)) if with_claims else None,
    )


def _usage(flavors: list[FlavorUsage] | None, gpus: frozenset[str]) -> tuple[int, int]:
    total = borrowed = 0
    for f in flavors or ():
        for r in f.resources or ():
            if r.name in gpus:
                total += _gpus(r.total)
                borrowed += _gpus(r.borrowed)
    return total, borrowed


def cluster_queue(q: ClusterQueueObj, dra_gpus: frozenset[str] = frozenset()) -> ClusterQueue:
    """Return a ClusterQueue's GPUs: nominal quota, borrowing and lending limits over its flavors, usage.

    `dra_gpus`: Kueue's names for GPU DeviceClasses (its deviceClassMappings), counted beside nvidia.com/gpu."""
    m = _named(q.metadata, "ClusterQueue", namespaced=False)
    gpus = frozenset({GPU}) | dra_gpus
    spec = q.spec or ClusterQueueSpec()
    st = q.status or QueueStatus()
    nominal: int | None = None
    borrow: int | None = 0
    lend: int | None = 0
    for rg in spec.resourceGroups or ():
        for f in rg.flavors or ():
            for r in f.resources or ():
                if r.name not in gpus:
                    continue
                nominal = (nominal or 0) + _gpus(r.nominalQuota)
                # No limit on one flavor: borrowing (lending) is unlimited for the queue's GPUs.
                borrow = (
                    None if borrow is None or r.borrowingLimit is None else borrow + _gpus(r.borrowingLimit)
                )
                lend = None if lend is None or r.lendingLimit is None else lend + _gpus(r.lendingLimit)
    reserved, _ = _usage(st.flavorsReservation, gpus)
    used, borrowed = _usage(st.flavorsUsage, gpus)
    return ClusterQueue(
        m.name or "",
        spec.cohortName or spec.cohort or "",
        nominal,
        borrow if nominal is not None else None,
        lend if nominal is not None else None,
        reserved,
        used,
        borrowed,
        max(0, st.pendingWorkloads or 0),
        max(0, st.admittedWorkloads or 0),
        bool(spec.stopPolicy and spec.stopPolicy != "None"),
    )


def local_queue(q: LocalQueueObj) -> LocalQueue:
    m = _named(q.metadata, "LocalQueue", namespaced=True)
    st = q.status or QueueStatus()
    return LocalQueue(
        m.namespace or "",
        m.name or "",
        (q.spec.clusterQueue or "") if q.spec is not None else "",
        max(0, st.pendingWorkloads or 0),
        max(0, st.admittedWorkloads or 0),
    )


def priority_class(pc: PriorityClassObj) -> WorkloadPriorityClass:
    m = _named(pc.metadata, "WorkloadPriorityClass", namespaced=False)
    if pc.value is None:
        raise DecodeError(f"WorkloadPriorityClass {m.name!r} without a value", kind="WorkloadPriorityClass")
    return WorkloadPriorityClass(m.name or "", pc.value)


def pending_positions(p: PendingWorkloads) -> dict[tuple[str, str], int]:
    """Return (namespace, Workload name) → 0-based position in the ClusterQueue, of a pendingworkloads body."""
    out: dict[tuple[str, str], int] = {}
    for i, item in enumerate(p.items or ()):
        m = item.metadata
        if m is None or not m.name or not m.namespace:
            continue
        pos = item.positionInClusterQueue
        out[(m.namespace, m.name)] = pos if pos is not None and pos >= 0 else i
    return out


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds, by kind name."""
    gpu_resources = ctx.kueue_gpu_resources
    return {
        # A Kueue Workload, v1beta2 or v1beta1.
        kinds.KUEUE_WORKLOAD.name: KindReader(
            reader("KueueWorkload", Workload, lambda w: workload(w, parse_time, ctx.sums_of, ctx.share_str))
        ),
        kinds.CLUSTER_QUEUE.name: KindReader(
            reader("ClusterQueue", ClusterQueueObj, lambda q: cluster_queue(q, gpu_resources))
        ),
        kinds.LOCAL_QUEUE.name: KindReader(reader("LocalQueue", LocalQueueObj, local_queue)),
        kinds.WORKLOAD_PRIORITY_CLASS.name: KindReader(
            reader("WorkloadPriorityClass", PriorityClassObj, priority_class)
        ),
    }
