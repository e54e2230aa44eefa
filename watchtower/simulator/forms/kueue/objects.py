"""Kueue objects as the API server serves them: a Job's Workload, ClusterQueues, LocalQueues, priority classes.

Shapes and words from sigs.k8s.io/kueue v0.17.0: apis/kueue/v1beta2 (workload_types.go, clusterqueue_types.go,
localqueue_types.go, workloadpriorityclass_types.go), the test wrappers pkg/util/testing/v1beta2/wrappers.go
(MakeWorkload, ReserveQuotaAt, AdmittedAt), the conditions Kueue writes: pkg/workload/workload.go
(SetQuotaReservation "Quota reserved in ClusterQueue <cq>", UnsetQuotaReservationWithCondition,
SetEvictedCondition, SetPreemptedCondition), pkg/scheduler/scheduler.go (reason "Pending" with the flavor
assigner's message), pkg/scheduler/flavorassigner/flavorassigner.go ("couldn't assign flavors to pod set
<ps>: insufficient unused quota for <res> in flavor <f>, <n> more needed"), pkg/scheduler/preemption/
preemption.go (preemptionMessage), and the workload's name (pkg/controller/jobframework/workload_names.go:
"<kind>-<owner>-<5 hex of a sha1>").
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import Any

from watchtower.simulator.objects import new_uid, ts

KUEUE_API = "kueue.x-k8s.io/v1beta2"
GPU = "nvidia.com/gpu"
JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
HUMAN_REASONS = {  # preemption.go HumanReadablePreemptionReasons
    "InClusterQueue": "prioritization in the ClusterQueue",
    "InCohortReclamation": "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    "InCohortReclaimWhileBorrowing": "reclamation within the cohort while borrowing",
}


def workload_name(owner_kind: str, owner_name: str, owner_uid: str, owner_group: str = "batch") -> str:
    """Return the name Kueue gives a job's Workload: "job-<name>-<hash>" (workload_names.go)."""
    # Kueue names it with a sha1 (a name, not a secret): usedforsecurity=False says so.
    text = f"{owner_kind}\n{owner_group}\n{owner_name}\n{owner_uid}".encode()
    h = hashlib.sha1(text, usedforsecurity=False).hexdigest()
    return f"{owner_kind.lower()}-{owner_name}-{h[:5]}"


def pending_message(pod_set: str, flavor: str, more: int) -> str:
    """Return the scheduler's words for a workload short of quota (flavorassigner.go)."""
    return (
        f"couldn't assign flavors to pod set {pod_set}: insufficient unused quota for {GPU} in flavor "
        f"{flavor}, {more} more needed"
    )


def preemption_message(preemptor_uid: str, job_uid: str, reason: str, preemptor_path: str, path: str) -> str:
    return (
        f"Preempted to accommodate a workload (UID: {preemptor_uid}, JobUID: {job_uid}) due to "
        f"{HUMAN_REASONS.get(reason, 'UNKNOWN')}; preemptor path: {preemptor_path}; preemptee path: {path}"
    )


def _cond(type_: str, status: str, at: float, reason: str, message: str) -> dict[str, Any]:
    # metav1.Condition: no lastProbeTime, reason and message always written.
    return {
        "type": type_,
        "status": status,
        "observedGeneration": 1,
        "lastTransitionTime": ts(at),
        "reason": reason,
        "message": message,
    }


def workload(
    *,
    job: dict[str, Any],
    queue: str,
    created: float,
    pod_sets: Sequence[tuple[str, int, dict[str, Any]]] | None = None,
    priority: int | None = None,
    priority_class: str = "",
    priority_class_kind: str = "WorkloadPriorityClass",
    pending: tuple[float, str] | None = None,
    reserved: tuple[float, str] | None = None,
    admitted_at: float | None = None,
    pods_ready_at: float | None = None,
    preempted: tuple[float, str, str, str] | None = None,
    evictions: int = 0,
    finished: bool = False,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A Kueue Workload of a job (`job`: the Job, JobSet or TrainJob object), as Kueue's job reconciler
    makes it: named for the job's kind, controlled by the job (jobframework ConstructWorkload,
    SetControllerReference: `controller` and `blockOwnerDeletion` true).

    `pending`: (since, message) of QuotaReserved=False reason Pending; `reserved`: (at, ClusterQueue);
    `preempted`: (at, reason, preemptor uid, preemptor job uid)."""
    jm = job["metadata"]
    kind, api = job.get("kind", "Job"), job.get("apiVersion", "batch/v1")
    name = workload_name(kind, jm["name"], jm["uid"], api.rpartition("/")[0])
    if pod_sets is None:
        spec = job["spec"]
        pod_sets = [("main", spec.get("parallelism", 1), spec["template"])]
    meta: dict[str, Any] = {
        "name": name,
        "namespace": jm["namespace"],
        "uid": new_uid(f"kueue-wl/{jm['namespace']}/{name}/{created}"),
        "resourceVersion": resource_version,
        "generation": 1,
        "creationTimestamp": ts(created),
        "labels": {JOB_UID_LABEL: jm["uid"], QUEUE_LABEL: queue},
        "ownerReferences": [
            {
                "apiVersion": api,
                "kind": kind,
                "name": jm["name"],
                "uid": jm["uid"],
                "controller": True,
                "blockOwnerDeletion": True,
            }
        ],
        "finalizers": ["kueue.x-k8s.io/resource-in-use"],
    }
    wspec: dict[str, Any] = {
        "active": True,
        "queueName": queue,
        "podSets": [{"name": ps, "count": count, "template": tpl} for ps, count, tpl in pod_sets],
    }
    if priority is not None:
        wspec["priority"] = priority
    if priority_class:
        group = "kueue.x-k8s.io" if priority_class_kind == "WorkloadPriorityClass" else "scheduling.k8s.io"
        wspec["priorityClassRef"] = {"group": group, "kind": priority_class_kind, "name": priority_class}
    conds: list[dict[str, Any]] = []
    status: dict[str, Any] = {}
    if reserved is not None:
        at, cq = reserved
        conds.append(
            _cond("QuotaReserved", "True", at, "QuotaReserved", f"Quota reserved in ClusterQueue {cq}")
        )
        status["admission"] = {
            "clusterQueue": cq,
            "podSetAssignments": [
                {"name": ps, "count": count, "flavors": {GPU: "default-flavor"}} for ps, count, _ in pod_sets
            ],
        }
        if admitted_at is not None:
            conds.append(_cond("Admitted", "True", admitted_at, "Admitted", "The workload is admitted"))
    elif pending is not None:
        since, message = pending
        conds.append(_cond("QuotaReserved", "False", since, "Pending", message))
    if pods_ready_at is not None:
        conds.append(
            _cond(
                "PodsReady",
                "True",
                pods_ready_at,
                "Started",
                "All pods reached readiness and the workload is running",
            )
        )
    if preempted is not None:
        at, reason, by_uid, by_job = preempted
        path = "/" + (reserved[1] if reserved is not None else queue)
        msg = preemption_message(by_uid, by_job, reason, path, path)
        conds.append(_cond("Evicted", "True", at, "Preempted", msg))
        conds.append(_cond("Preempted", "True", at, reason, msg))
    if finished:
        conds.append(_cond("Finished", "True", created, "Succeeded", "Job finished successfully"))
    if conds:
        status["conditions"] = conds
    if evictions:
        status["schedulingStats"] = {
            "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": evictions}]
        }
    return {"apiVersion": KUEUE_API, "kind": "Workload", "metadata": meta, "spec": wspec, "status": status}


def cluster_queue(
    name: str,
    *,
    nominal_gpus: int,
    reserved_gpus: int = 0,
    cohort: str = "",
    borrowing_limit: int | None = None,
    pending: int = 0,
    admitted: int = 0,
) -> dict[str, Any]:
    """A ClusterQueue with one resource group of GPUs in one flavor, as `kubectl get -o json` shows it."""
    res: dict[str, Any] = {"name": GPU, "nominalQuota": str(nominal_gpus)}
    if borrowing_limit is not None:
        res["borrowingLimit"] = str(borrowing_limit)
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "queueingStrategy": "BestEffortFIFO",
        "preemption": {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Never"},
        "resourceGroups": [
            {"coveredResources": [GPU], "flavors": [{"name": "default-flavor", "resources": [res]}]}
        ],
    }
    if cohort:
        spec["cohortName"] = cohort
    usage = [
        {"name": "default-flavor", "resources": [{"name": GPU, "total": str(reserved_gpus), "borrowed": "0"}]}
    ]
    return {
        "apiVersion": KUEUE_API,
        "kind": "ClusterQueue",
        "metadata": {"name": name, "uid": new_uid(f"cq/{name}"), "resourceVersion": "1", "generation": 1},
        "spec": spec,
        "status": {
            "flavorsReservation": usage,
            "flavorsUsage": usage,
            "pendingWorkloads": pending,
            "reservingWorkloads": admitted,
            "admittedWorkloads": admitted,
        },
    }


def local_queue(namespace: str, name: str, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": new_uid(f"lq/{namespace}/{name}"),
            "resourceVersion": "1",
        },
        "spec": {"clusterQueue": cluster_queue},
        "status": {"pendingWorkloads": 0, "reservingWorkloads": 0, "admittedWorkloads": 0},
    }


def workload_priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name, "uid": new_uid(f"wpc/{name}"), "resourceVersion": "1"},
        "value": value,
        "description": f"{name} work",
    }


def pending_workloads(items: Sequence[tuple[str, str, str, int]]) -> dict[str, Any]:
    """A visibility API PendingWorkloadsSummary: (namespace, workload, local queue, priority), in order."""
    return {
        "kind": "PendingWorkloadsSummary",
        "apiVersion": "visibility.kueue.x-k8s.io/v1beta2",
        "metadata": {"creationTimestamp": None},
        "items": [
            {
                "metadata": {"name": name, "namespace": ns, "creationTimestamp": None},
                "priority": prio,
                "localQueueName": lq,
                "positionInClusterQueue": i,
                "positionInLocalQueue": i,
            }
            for i, (ns, name, lq, prio) in enumerate(items)
        ],
    }
