"""The gangs form (pod groups and queues), wire → domain: upstream Workload and PodGroup, Volcano PodGroup and Queue.

The field names are the upstream ones: k8s.io/api scheduling/v1alpha1, v1alpha2 and v1beta1 (1.37, the same
fields as v1alpha2) types.go (Workload spec.podGroups[].policy / spec.podGroupTemplates[].schedulingPolicy,
PodGroup status.conditions),
volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go (PodGroupSpec, PodGroupStatus, QueueSpec,
QueueStatus). Each raises DecodeError for an object the domain cannot use.
"""

from __future__ import annotations

from collections.abc import Callable

import msgspec

from watchtower.domain import kinds
from watchtower.domain.forms.gangs.records import Gang, GangWorkload, VolcanoQueue
from watchtower.ports import DecodeError

from ..quantities import GPU, ceil_int, parse_quantity
from ..reading import KindReader, Reading, parse_time, reader
from ..wire import Cond, Meta, Qty

# Upstream's condition, renamed after 1.36 (kubernetes/kubernetes#139743; 1.36.3 writes PodGroupScheduled, 1.37.2
# PodGroupInitiallyScheduled): both mean the gang was placed.
SCHEDULED_CONDITIONS = ("PodGroupInitiallyScheduled", "PodGroupScheduled")
VOLCANO_UNSCHEDULABLE = "Unschedulable"  # v1beta1 PodGroupUnschedulableType

Times = Callable[[str | None], float | None]


class GangPolicy(msgspec.Struct, gc=False):
    minCount: int | None = None


class GroupPolicy(msgspec.Struct, gc=False):
    """PodGroupSchedulingPolicy (v1alpha2) / PodGroupPolicy (v1alpha1): basic or gang."""

    gang: GangPolicy | None = None


class WorkloadGroup(msgspec.Struct, gc=False):
    """A v1alpha1 spec.podGroups item (its `policy`) or a v1alpha2 spec.podGroupTemplates item."""

    name: str | None = None
    policy: GroupPolicy | None = None  # v1alpha1
    schedulingPolicy: GroupPolicy | None = None  # v1alpha2


class WorkloadSpec(msgspec.Struct, gc=False):
    podGroups: list[WorkloadGroup] | None = None  # v1alpha1 (1.35)
    podGroupTemplates: list[WorkloadGroup] | None = None  # v1alpha2 (1.36)


class Workload(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: WorkloadSpec | None = None


class PodGroupSpec(msgspec.Struct, gc=False):
    schedulingPolicy: GroupPolicy | None = None
    # Filled in by admission from the class, as for pods (a 1.36.3 PodGroup carries both).
    priorityClassName: str | None = None
    priority: int | None = None


class GroupStatus(msgspec.Struct, gc=False):
    phase: str | None = None  # Volcano
    conditions: list[Cond] | None = None
    running: int | None = None  # Volcano


class PodGroup(msgspec.Struct, gc=False):
    """scheduling.k8s.io/v1beta1 (1.37) or v1alpha2 (1.36) PodGroup."""

    metadata: Meta | None = None
    spec: PodGroupSpec | None = None
    status: GroupStatus | None = None


class VolcanoGroupSpec(msgspec.Struct, gc=False):
    minMember: int | None = None
    queue: str | None = None
    priorityClassName: str | None = None


class VolcanoPodGroup(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: VolcanoGroupSpec | None = None
    status: GroupStatus | None = None


class Guarantee(msgspec.Struct, gc=False):
    resource: dict[str, Qty] | None = None


class QueueSpec(msgspec.Struct, gc=False):
    weight: int | None = None
    capability: dict[str, Qty] | None = None
    deserved: dict[str, Qty] | None = None
    guarantee: Guarantee | None = None


class QueueStatus(msgspec.Struct, gc=False):
    state: str | None = None
    allocated: dict[str, Qty] | None = None


class VolcanoQueueObj(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: QueueSpec | None = None
    status: QueueStatus | None = None


def _meta(meta: Meta | None, kind: str, *, namespaced: bool = True) -> Meta:
    if meta is None or not meta.name:
        raise DecodeError(f"{kind} without a name", kind=kind, uid=(meta.uid or "") if meta else "")
    if namespaced and not meta.namespace:
        raise DecodeError(f"{kind} {meta.name!r} without a namespace", kind=kind, uid=meta.uid or "")
    return meta


def _count(n: int | None, what: str, kind: str, name: str) -> int:
    if n is None:
        return 0
    if n < 0:
        raise DecodeError(f"{kind} {name!r}: negative {what} {n}", kind=kind, name=name)
    return n


def _gpus(d: dict[str, Qty] | None) -> int | None:
    if not d or GPU not in d:
        return None
    return ceil_int(parse_quantity(d[GPU]))


def workload(w: Workload) -> GangWorkload:
    """Return an upstream Workload: its groups' gang minimums, from either version's list."""
    m = _meta(w.metadata, "Workload")
    spec = w.spec or WorkloadSpec()
    groups = spec.podGroupTemplates if spec.podGroupTemplates is not None else spec.podGroups
    out: list[tuple[str, int]] = []
    for g in groups or ():
        policy = g.schedulingPolicy or g.policy
        gang = policy.gang if policy is not None else None
        n = _count(gang.minCount if gang is not None else None, "minCount", "Workload", m.name or "")
        out.append((g.name or "", n))
    return GangWorkload(m.namespace or "", m.name or "", m.uid or "", tuple(out))


def pod_group(g: PodGroup, times: Times) -> Gang:
    """Return an upstream PodGroup: its gang minimum and whether the scheduler placed it."""
    m = _meta(g.metadata, "PodGroup")
    policy = g.spec.schedulingPolicy if g.spec is not None else None
    gang = policy.gang if policy is not None else None
    n = _count(gang.minCount if gang is not None else None, "minCount", "PodGroup", m.name or "")
    scheduled, reason, message = False, "", ""
    for c in (g.status.conditions if g.status is not None else None) or ():
        if c.type in SCHEDULED_CONDITIONS:
            if c.status == "True":
                scheduled, reason, message = True, c.reason or "", c.message or ""
                break
            reason, message = c.reason or "", c.message or ""
    spec = g.spec or PodGroupSpec()
    return Gang(
        m.namespace or "",
        m.name or "",
        m.uid or "",
        times(m.creationTimestamp),
        n,
        scheduled,
        reason,
        message,
        priority_class=spec.priorityClassName or "",
        priority=spec.priority,
    )


def volcano_pod_group(g: VolcanoPodGroup, times: Times) -> Gang:
    """Return a Volcano PodGroup: minMember, queue, class, phase and its Unschedulable words."""
    m = _meta(g.metadata, "VolcanoPodGroup")
    spec = g.spec or VolcanoGroupSpec()
    st = g.status or GroupStatus()
    n = _count(spec.minMember, "minMember", "VolcanoPodGroup", m.name or "")
    reason = message = ""
    for c in st.conditions or ():
        if c.type == VOLCANO_UNSCHEDULABLE and c.status == "True":
            reason, message = c.reason or "", c.message or ""
    return Gang(
        m.namespace or "",
        m.name or "",
        m.uid or "",
        times(m.creationTimestamp),
        n,
        st.phase == "Running",
        reason,
        message,
        st.phase or "",
        spec.queue or "",
        spec.priorityClassName or "",
        _count(st.running, "running", "VolcanoPodGroup", m.name or ""),
    )


def volcano_queue(q: VolcanoQueueObj) -> VolcanoQueue:
    """Return a Volcano Queue's entitlement in GPUs: capability, deserved, guarantee, allocated."""
    m = _meta(q.metadata, "VolcanoQueue", namespaced=False)
    spec = q.spec or QueueSpec()
    st = q.status or QueueStatus()
    return VolcanoQueue(
        m.name or "",
        _count(spec.weight, "weight", "VolcanoQueue", m.name or ""),
        _gpus(spec.capability),
        _gpus(spec.deserved),
        _gpus(spec.guarantee.resource if spec.guarantee is not None else None),
        _gpus(st.allocated),
        st.state or "",
    )


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds, by kind name."""
    return {
        # An upstream Workload, v1alpha1 (1.35) or v1alpha2 (1.36), and its PodGroup.
        kinds.WORKLOAD.name: KindReader(reader("Workload", Workload, workload)),
        kinds.POD_GROUP.name: KindReader(reader("PodGroup", PodGroup, lambda g: pod_group(g, parse_time))),
        kinds.VOLCANO_POD_GROUP.name: KindReader(
            reader("VolcanoPodGroup", VolcanoPodGroup, lambda g: volcano_pod_group(g, parse_time))
        ),
        kinds.VOLCANO_QUEUE.name: KindReader(reader("VolcanoQueue", VolcanoQueueObj, volcano_queue)),
    }
