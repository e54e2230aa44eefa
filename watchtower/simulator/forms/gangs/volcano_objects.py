"""Volcano objects as the API server serves them: Queues, the PodGroup paddle-operator makes for a PaddleJob,
the conditions and events vc-scheduler writes, and the annotations on the pods the operator makes for it.

Shapes and words from: volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go (QueueSpec, QueueStatus,
PodGroupSpec, PodGroupStatus, conditions Unschedulable / Scheduled, reason NotEnoughResources);
volcano-sh/volcano pkg/scheduler/plugins/gang/gang.go (OnSessionClose: the Unschedulable condition, skipped
for a group with no pods; "tasks in gang are ready to be scheduled"), pkg/scheduler/api/job_info.go (FitError,
TaskSchedulingReason), pkg/scheduler/api/unschedule_info.go (FitErrors.Error), actions/allocate/allocate.go,
pkg/scheduler/plugins/proportion/proportion.go and overcommit/overcommit.go (the enqueue refusals' events),
pkg/scheduler/cache/cache.go (RecordJobStatusEvent); PaddleFlow/paddle-operator controllers/paddlejob_helper.go
(constructPodGroup: named after the job, minMember, minResources, queue, priorityClassName) and
controllers/paddlejob_controller.go (the pods' schedulerName and annotations); the captures in
tests/fixtures/real/volcano-real-podgroup-*.json (vc-scheduler ed72c7c8).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchtower.simulator.objects import PADDLE_API, new_uid, owner_ref, ts

VOLCANO_API = "scheduling.volcano.sh/v1beta1"
SCHEDULER = "volcano"
GPU = "nvidia.com/gpu"
NOT_ENOUGH = "NotEnoughResources"  # v1beta1 NotEnoughResourcesReason
READY_REASON = "tasks in gang are ready to be scheduled"  # gang.go, the Scheduled condition's reason
# allocate.go predicate: the resource check's reason (unschedule_info.go WrapInsufficientResourceReason);
# a cordoned node fails kube's NodeUnschedulable filter, which the predicates plugin runs.
NO_FIT = f"Insufficient {GPU}"
UNSCHEDULABLE_NODE = "node(s) were unschedulable"
# The enqueue refusals (util.FormatResourceNames(prefix, verb, names): "<prefix>: <verb> <names>").
QUEUE_FULL = f"queue resource quota insufficient: insufficient {GPU}"  # proportion.go
CLUSTER_FULL = f"resource in cluster is overused: overused {GPU}"  # overcommit.go
OVERCOMMIT_FACTOR = 1.2  # overcommit.go defaultOverCommitFactor


def resources(gpus: int, cpu_millis: int, memory_bytes: int) -> dict[str, str]:
    return {"cpu": f"{cpu_millis // 1000}", "memory": f"{memory_bytes // 2**30}Gi", GPU: str(gpus)}


def queue(
    name: str,
    *,
    created: float,
    weight: int = 1,
    capability_gpus: int | None = None,
    deserved_gpus: int | None = None,
    guarantee_gpus: int | None = None,
    hierarchy_root: bool = False,
) -> dict[str, Any]:
    """A Queue as an admin writes it; status as vc-controller-manager keeps it (state, allocated)."""
    spec: dict[str, Any] = {
        "dequeueStrategy": "traverse",
        "reclaimable": not hierarchy_root,
        "weight": weight,
    }
    if capability_gpus is not None:
        spec["capability"] = {GPU: str(capability_gpus)}
    if deserved_gpus is not None:
        spec["deserved"] = {GPU: str(deserved_gpus)}
    spec["guarantee"] = {"resource": {GPU: str(guarantee_gpus)}} if guarantee_gpus is not None else {}
    status: dict[str, Any] = {"allocated": {"cpu": "0", "memory": "0"}, "reservation": {}}
    if not hierarchy_root:  # the root queue vc-scheduler makes itself has no state (the capture)
        status["state"] = "Open"
    return {
        "apiVersion": VOLCANO_API,
        "kind": "Queue",
        "metadata": {
            "name": name,
            "uid": new_uid(f"volcano-queue/{name}"),
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": ts(created),
        },
        "spec": spec,
        "status": status,
    }


def allocated(gpus: int, cpu_millis: int, memory_bytes: int, pods: int) -> dict[str, str]:
    """A Queue's status.allocated: what its bound pods request (the capture has no GPU key at zero)."""
    if not pods:
        return {"cpu": "0", "memory": "0"}
    return {**resources(gpus, cpu_millis, memory_bytes), "pods": str(pods)}


def pod_group(
    *,
    job: str,
    namespace: str,
    created: float,
    job_uid: str,
    min_member: int,
    min_resources: Mapping[str, str],
    queue_name: str,
    priority_class: str,
) -> dict[str, Any]:
    """The PodGroup paddle-operator makes for a PaddleJob (constructPodGroup), before vc-scheduler sees it."""
    return {
        "apiVersion": VOLCANO_API,
        "kind": "PodGroup",
        "metadata": {
            "name": job,
            "namespace": namespace,
            "uid": new_uid(f"volcano-podgroup/{namespace}/{job}/{job_uid}"),
            "resourceVersion": "1",
            "generation": 1,
            "creationTimestamp": ts(created),
            "ownerReferences": [owner_ref("PaddleJob", job, api_version=PADDLE_API, uid=job_uid)],
        },
        "spec": {
            "minMember": min_member,
            "minResources": dict(min_resources),
            "priorityClassName": priority_class,
            "queue": queue_name,
        },
        "status": {},
    }


def condition(type_: str, at: float, *, reason: str, message: str, session: str) -> dict[str, Any]:
    """A PodGroup condition as the gang plugin writes it: True, stamped with the session's transitionID."""
    c: dict[str, Any] = {
        "lastTransitionTime": ts(at),
        "reason": reason,
        "status": "True",
        "transitionID": new_uid(f"volcano-session/{session}"),
        "type": type_,
    }
    if message:
        c["message"] = message
    return c


def fit_error(statuses: Mapping[str, int], min_available: int, pending: Mapping[str, int]) -> str:
    """Return job_info.go FitError without its Origin part: "pod group is not ready, 4 Pending, 4 minAvailable;
    Pending: 4 Unschedulable" (each histogram sorted as strings, as Go's sort.Strings does)."""
    hist = {**statuses, "minAvailable": min_available}
    text = "pod group is not ready, " + ", ".join(sorted(f"{n} {k}" for k, n in hist.items()))
    if pending:
        text += "; Pending: " + ", ".join(sorted(f"{n} {k}" for k, n in pending.items()))
    return text


def nodes_unavailable(reasons: Mapping[str, int], nodes: int) -> str:
    """Return unschedule_info.go FitErrors.Error: "0/12 nodes are unavailable: 1 node(s) were unschedulable, 11 Insufficient nvidia.com/gpu."."""
    return (
        f"0/{nodes} nodes are unavailable: " + ", ".join(sorted(f"{n} {r}" for r, n in reasons.items())) + "."
    )


def pod_annotations(job: str, role: str, queue_name: str) -> dict[str, str]:
    """The annotations paddle-operator puts on a Volcano-scheduled pod (Reconcile, its pod creation)."""
    return {
        "scheduling.k8s.io/group-name": job,
        "volcano.sh/job-name": job,
        "volcano.sh/job-version": "0",
        "volcano.sh/queue-name": queue_name,
        "volcano.sh/task-spec": role,
    }
