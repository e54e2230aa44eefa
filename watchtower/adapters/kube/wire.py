"""The Kubernetes JSON wire format, as msgspec Structs that declare only the fields Watchtower reads.

The rest of each object is skipped without building Python objects for it. The structs are not GC-tracked:
a page of pods makes thousands of them, and tracked ones would set off collections that walk the whole
(large, long-lived) cluster state.
"""

from __future__ import annotations

from typing import cast

import msgspec

Qty = str | int | float  # a resource quantity as JSON carries it: "500m", "16Gi", 2


class Owner(msgspec.Struct, gc=False):
    kind: str = ""
    name: str = ""
    apiVersion: str = ""
    uid: str = ""
    controller: bool | None = None


class Meta(msgspec.Struct, gc=False):
    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    creationTimestamp: str | None = None
    deletionTimestamp: str | None = None
    resourceVersion: str | None = None
    labels: dict[str, str] | None = None
    annotations: dict[str, str] | None = None
    ownerReferences: list[Owner] | None = None


class Resources(msgspec.Struct, gc=False):
    requests: dict[str, Qty] | None = None
    limits: dict[str, Qty] | None = None


NO_RAW = msgspec.Raw(b"")


class Container(msgspec.Struct, gc=False):
    image: str | None = None
    # Left as JSON text: the pods of a job repeat it byte for byte, so its sums are memoised on the bytes.
    resources: msgspec.Raw = NO_RAW


class WorkloadRef(msgspec.Struct, gc=False):
    """1.35 spec.workloadRef (core/v1 WorkloadReference): the Workload and the podGroup within it."""

    name: str | None = None
    podGroup: str | None = None


class SchedulingGroup(msgspec.Struct, gc=False):
    """1.36 spec.schedulingGroup (core/v1 PodSchedulingGroup), which replaced workloadRef."""

    podGroupName: str | None = None


class PodResourceClaim(msgspec.Struct, gc=False):
    """core/v1 PodResourceClaim: a claim by name, or a template the claim is generated from."""

    name: str = ""
    resourceClaimName: str | None = None
    resourceClaimTemplateName: str | None = None


class PodResourceClaimStatus(msgspec.Struct, gc=False):
    name: str = ""
    resourceClaimName: str | None = None


class PodSpec(msgspec.Struct, gc=False):
    nodeName: str | None = None
    priority: int | None = None
    priorityClassName: str | None = None
    preemptionPolicy: str | None = None
    schedulerName: str | None = None
    schedulingGates: list[msgspec.Raw] | None = None
    containers: list[Container] | None = None
    initContainers: list[Container] | None = None
    overhead: msgspec.Raw = NO_RAW
    workloadRef: WorkloadRef | None = None
    schedulingGroup: SchedulingGroup | None = None
    resourceClaims: list[PodResourceClaim] | None = None


class Cond(msgspec.Struct, gc=False):
    type: str = ""
    status: str = ""
    reason: str | None = None
    message: str | None = None
    lastTransitionTime: str | None = None


class StartedAt(msgspec.Struct, gc=False):
    startedAt: str | None = None


class CState(msgspec.Struct, gc=False):
    running: StartedAt | None = None
    terminated: StartedAt | None = None


class CStatus(msgspec.Struct, gc=False):
    state: CState | None = None


class PodStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    reason: str | None = None
    startTime: str | None = None
    nominatedNodeName: str | None = None
    conditions: list[Cond] | None = None
    containerStatuses: list[CStatus] | None = None
    resourceClaimStatuses: list[PodResourceClaimStatus] | None = None


class PodMeta(Meta, gc=False):
    # Per decoder, structs with one field per kept key (`_kept`): the other labels and annotations are
    # skipped without building a string for them (label maps were the dearest part of a pod to decode).
    labels: msgspec.Struct | None = None  # type: ignore[assignment]
    annotations: msgspec.Struct | None = None  # type: ignore[assignment]


class Pod(msgspec.Struct, gc=False):
    metadata: PodMeta | None = None
    spec: PodSpec | None = None
    status: PodStatus | None = None


class PodPage(msgspec.Struct, gc=False):
    items: list[Pod] | None = None


def _kept(name: str, keys: tuple[str, ...]) -> type[msgspec.Struct]:
    """Return a struct that reads only these keys of a string map; its fields follow `keys`."""
    fields = [(f"k{i}", str | None, msgspec.field(default=None, name=k)) for i, k in enumerate(keys)]
    return msgspec.defstruct(name, fields, gc=False)


def pod_types(
    labels: tuple[str, ...], annotations: tuple[str, ...]
) -> tuple[type[Pod], type[msgspec.Struct]]:
    """Return the pod struct and the LIST page struct that keep only these labels and annotations."""
    meta = msgspec.defstruct(
        "PodMeta",
        [
            ("labels", _kept("Labels", labels) | None, None),
            ("annotations", _kept("Annotations", annotations) | None, None),
        ],
        bases=(PodMeta,),
        gc=False,
    )
    pod = msgspec.defstruct("Pod", [("metadata", meta | None, None)], bases=(Pod,), gc=False)
    page = msgspec.defstruct("PodPage", [("items", list[pod] | None, None)], bases=(PodPage,), gc=False)  # type: ignore[valid-type]
    return cast(type[Pod], pod), cast(type[PodPage], page)


class ControllerMeta(msgspec.Struct, gc=False):
    """A controller's metadata without its labels and annotations: nothing of them is read."""

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    creationTimestamp: str | None = None
    ownerReferences: list[Owner] | None = None


class Template(msgspec.Struct, gc=False):
    # Only the spec: the template's labels and annotations are the pods', read from the pods themselves.
    spec: PodSpec | None = None


class ControllerSpec(msgspec.Struct, gc=False):
    """batch/v1 JobSpec and apps/v1 ReplicaSetSpec in one: each fills its own names."""

    template: Template | None = None
    replicas: int | None = None  # ReplicaSet
    parallelism: int | None = None  # Job
    completions: int | None = None
    suspend: bool | None = None


class JobStatus(msgspec.Struct, gc=False):
    succeeded: int | None = None


class Controller(msgspec.Struct, gc=False):
    metadata: ControllerMeta | None = None
    spec: ControllerSpec | None = None
    status: JobStatus | None = None


class PaddleRole(msgspec.Struct, gc=False):
    """One role of a PaddleJob (ps, worker, heter): how many pods, made from which template."""

    replicas: int | None = None
    template: Template | None = None


class PaddleSchedulingPolicy(msgspec.Struct, gc=False):
    """spec.schedulingPolicy: what paddle-operator copies into the job's Volcano PodGroup."""

    minAvailable: int | None = None
    queue: str | None = None
    priorityClass: str | None = None


class PaddleJobSpec(msgspec.Struct, gc=False):
    ps: PaddleRole | None = None
    worker: PaddleRole | None = None
    heter: PaddleRole | None = None
    schedulingPolicy: PaddleSchedulingPolicy | None = None


class PaddleRoleStatus(msgspec.Struct, gc=False):
    """One role's ResourceStatus: how many of its pods are in each state."""

    pending: int | None = None
    starting: int | None = None
    running: int | None = None
    failed: int | None = None
    succeeded: int | None = None
    unknown: int | None = None


class PaddleJobStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    ps: PaddleRoleStatus | None = None
    worker: PaddleRoleStatus | None = None
    heter: PaddleRoleStatus | None = None


class PaddleJob(msgspec.Struct, gc=False):
    """batch.paddlepaddle.org/v1 PaddleJob (PaddleFlow/paddle-operator api/v1/paddlejob_types.go)."""

    metadata: ControllerMeta | None = None
    spec: PaddleJobSpec | None = None
    status: PaddleJobStatus | None = None


# ---- pod groups (scheduling.k8s.io v1alpha1/v1alpha2; scheduling.volcano.sh v1beta1) ----------------


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
    """scheduling.k8s.io/v1alpha2 PodGroup."""

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


class VolcanoQueue(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: QueueSpec | None = None
    status: QueueStatus | None = None


# ---- Dynamic Resource Allocation (resource.k8s.io v1 and v1beta2, k8s.io/api resource/v1/types.go) ----


class CelSelector(msgspec.Struct, gc=False):
    expression: str = ""


class DeviceSelector(msgspec.Struct, gc=False):
    cel: CelSelector | None = None


class DeviceClassSpec(msgspec.Struct, gc=False):
    selectors: list[DeviceSelector] | None = None


class DeviceClass(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: DeviceClassSpec | None = None


class ExactDeviceRequest(msgspec.Struct, gc=False):
    """ExactDeviceRequest, and a firstAvailable DeviceSubRequest (which adds its own name)."""

    name: str = ""
    deviceClassName: str = ""
    allocationMode: str | None = None  # ExactCount (default) or All
    count: int | None = None


class DeviceRequest(msgspec.Struct, gc=False):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    firstAvailable: list[ExactDeviceRequest] | None = None


class DeviceClaim(msgspec.Struct, gc=False):
    requests: list[DeviceRequest] | None = None


class ResourceClaimSpec(msgspec.Struct, gc=False):
    devices: DeviceClaim | None = None


class AllocationResultItem(msgspec.Struct, gc=False):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""


class DeviceAllocation(msgspec.Struct, gc=False):
    results: list[AllocationResultItem] | None = None


class Allocation(msgspec.Struct, gc=False):
    devices: DeviceAllocation | None = None


class ResourceClaimStatus(msgspec.Struct, gc=False):
    allocation: Allocation | None = None


class ResourceClaim(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: ResourceClaimSpec | None = None
    status: ResourceClaimStatus | None = None


class ClaimTemplateSpec(msgspec.Struct, gc=False):
    spec: ResourceClaimSpec | None = None


class ResourceClaimTemplate(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: ClaimTemplateSpec | None = None


class DeviceAttribute(msgspec.Struct, gc=False):
    # Only string attributes are read (a class's selectors compare them); int, bool, version skipped.
    string: str | None = None


class SliceDevice(msgspec.Struct, gc=False):
    name: str = ""
    attributes: dict[str, DeviceAttribute] | None = None


class ResourcePool(msgspec.Struct, gc=False):
    name: str = ""
    generation: int | None = None


class ResourceSliceSpec(msgspec.Struct, gc=False):
    driver: str = ""
    pool: ResourcePool | None = None
    nodeName: str | None = None
    devices: list[SliceDevice] | None = None


class ResourceSlice(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: ResourceSliceSpec | None = None


class JobTemplate(msgspec.Struct, gc=False):
    spec: ControllerSpec | None = None


class ReplicatedJob(msgspec.Struct, gc=False):
    """One replicatedJob of a JobSet: `replicas` child Jobs made from one Job template."""

    replicas: int | None = None
    template: JobTemplate | None = None


class JobSetSpec(msgspec.Struct, gc=False):
    replicatedJobs: list[ReplicatedJob] | None = None
    suspend: bool | None = None


class JobSet(msgspec.Struct, gc=False):
    """jobset.x-k8s.io/v1alpha2 JobSet (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go)."""

    metadata: ControllerMeta | None = None
    spec: JobSetSpec | None = None


class Taint(msgspec.Struct, gc=False):
    key: str = ""
    value: str | None = None
    effect: str = ""


class NodeSpec(msgspec.Struct, gc=False):
    unschedulable: bool | None = None
    taints: list[Taint] | None = None


class NodeStatus(msgspec.Struct, gc=False):
    allocatable: dict[str, Qty] | None = None
    capacity: dict[str, Qty] | None = None


class Node(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: NodeSpec | None = None
    status: NodeStatus | None = None


class Namespace(msgspec.Struct, gc=False):
    metadata: Meta | None = None


class PriorityClass(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    value: int | None = None
    preemptionPolicy: str | None = None
    globalDefault: bool | None = None


class QuotaStatus(msgspec.Struct, gc=False):
    hard: dict[str, Qty] | None = None
    used: dict[str, Qty] | None = None


class QuotaSpec(msgspec.Struct, gc=False):
    hard: dict[str, Qty] | None = None


class Quota(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: QuotaSpec | None = None
    status: QuotaStatus | None = None


class Ref(msgspec.Struct, gc=False):
    apiVersion: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None
    uid: str | None = None


class Series(msgspec.Struct, gc=False):
    count: int | None = None
    lastObservedTime: str | None = None


class Source(msgspec.Struct, gc=False):
    component: str | None = None


class Event(msgspec.Struct, gc=False):
    """core/v1 Event and events.k8s.io/v1 Event in one: each fills its own names."""

    metadata: Meta | None = None
    reason: str | None = None
    message: str | None = None
    note: str | None = None
    type: str | None = None
    involvedObject: Ref | None = None
    regarding: Ref | None = None
    related: Ref | None = None
    firstTimestamp: str | None = None
    lastTimestamp: str | None = None
    deprecatedFirstTimestamp: str | None = None
    deprecatedLastTimestamp: str | None = None
    eventTime: str | None = None
    count: int | None = None
    deprecatedCount: int | None = None
    series: Series | None = None
    source: Source | None = None
    reportingComponent: str | None = None
    reportingController: str | None = None


class Head(msgspec.Struct, gc=False):
    kind: str | None = None
    apiVersion: str | None = None
    metadata: Meta | None = None


class ListMeta(msgspec.Struct, gc=False):
    resourceVersion: str | None = None
    # `continue` is a Python keyword: renamed on the wire.
    cont: str | None = msgspec.field(default=None, name="continue")


class List(msgspec.Struct, gc=False):
    kind: str | None = None
    apiVersion: str | None = None
    metadata: ListMeta | None = None
    items: list[msgspec.Raw] | None = None


class WatchEvent(msgspec.Struct, gc=False):
    type: str = ""
    # msgspec cannot decode `Raw | None`; an absent or null object becomes None in decode_watch_line.
    object: msgspec.Raw = msgspec.Raw(b"")
