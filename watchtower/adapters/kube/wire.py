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
    nodeSelector: dict[str, str] | None = None


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


class ControllerAnnotations(msgspec.Struct, gc=False):
    """The one annotation of a controller that is read: its owner for owner notices; the rest is skipped."""

    notify: str | None = msgspec.field(default=None, name="watchtower.dev/notify")


class ControllerMeta(msgspec.Struct, gc=False):
    """A controller's metadata without its labels, and of its annotations only the owner notices' one."""

    name: str | None = None
    namespace: str | None = None
    uid: str | None = None
    creationTimestamp: str | None = None
    ownerReferences: list[Owner] | None = None
    annotations: ControllerAnnotations | None = None


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
