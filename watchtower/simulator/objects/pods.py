"""Pods as the API server returns them, the scheduler's PodScheduled conditions, a reference to a pod."""

from __future__ import annotations

from typing import Any

from .meta import condition, new_uid, ts


def pod(
    *,
    name: str,
    namespace: str,
    created: float,
    uid: str | None = None,
    gpus: int = 1,
    cpu: str = "4",
    memory: str = "32Gi",
    priority: int = 0,
    priority_class: str | None = None,
    preemption_policy: str = "PreemptLowerPriority",
    image: str = "paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6",
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: dict[str, Any] | None = None,
    node: str | None = None,
    phase: str = "Pending",
    conditions: list[dict[str, Any]] | None = None,
    start_time: float | None = None,
    running_since: float | None = None,
    deletion: float | None = None,
    grace: int = 30,
    nominated_node: str | None = None,
    scheduling_gates: list[str] | None = None,
    status_reason: str | None = None,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A Pod as the API server returns it: metadata, spec (one container), status with conditions."""
    meta: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "uid": uid or new_uid(f"{namespace}/{name}/{created}"),
        "resourceVersion": resource_version,
        "creationTimestamp": ts(created),
        "labels": dict(labels or {}),
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    if owner:
        meta["ownerReferences"] = [owner]
    if deletion is not None:
        meta["deletionTimestamp"] = ts(deletion)
        meta["deletionGracePeriodSeconds"] = grace
    resources: dict[str, Any] = {"requests": {"cpu": cpu, "memory": memory}, "limits": {"memory": memory}}
    if gpus:
        resources["requests"]["nvidia.com/gpu"] = str(gpus)
        resources["limits"]["nvidia.com/gpu"] = str(gpus)
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": image,
                "resources": resources,
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "imagePullPolicy": "IfNotPresent",
            }
        ],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": grace,
        "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default",
        "schedulerName": "default-scheduler",
        "enableServiceLinks": True,
        "priority": priority,
        "preemptionPolicy": preemption_policy,
        "tolerations": [
            {
                "key": "node.kubernetes.io/not-ready",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
            {
                "key": "node.kubernetes.io/unreachable",
                "operator": "Exists",
                "effect": "NoExecute",
                "tolerationSeconds": 300,
            },
        ],
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node:
        spec["nodeName"] = node
    if scheduling_gates:
        spec["schedulingGates"] = [{"name": g} for g in scheduling_gates]
    status: dict[str, Any] = {"phase": phase, "qosClass": "Burstable"}
    if conditions:
        status["conditions"] = conditions
    if start_time is not None:
        status["startTime"] = ts(start_time)
        status["hostIP"] = "10.0.0.1"
    if running_since is not None:
        status["containerStatuses"] = [
            {
                "name": "main",
                "image": image,
                "imageID": "",
                "ready": True,
                "restartCount": 0,
                "started": True,
                "state": {"running": {"startedAt": ts(running_since)}},
            }
        ]
    if nominated_node:
        status["nominatedNodeName"] = nominated_node
    if status_reason:
        status["reason"] = status_reason
    return {"kind": "Pod", "apiVersion": "v1", "metadata": meta, "spec": spec, "status": status}


def unschedulable(at: float, message: str) -> dict[str, Any]:
    """The PodScheduled=False condition the scheduler writes."""
    return condition("PodScheduled", "False", at, reason="Unschedulable", message=message)


def scheduling_gated(at: float) -> dict[str, Any]:
    """The PodScheduled=False condition the API server writes on a pod created with scheduling gates (as
    tests/fixtures/real/pod-scheduling-gated.json captured it)."""
    return condition(
        "PodScheduled",
        "False",
        at,
        reason="SchedulingGated",
        message="Scheduling is blocked due to non-empty scheduling gates",
    )


def scheduled(at: float) -> dict[str, Any]:
    return condition("PodScheduled", "True", at)


def pod_ref(p: dict[str, Any]) -> dict[str, str]:
    m = p["metadata"]
    return {
        "kind": "Pod",
        "namespace": m["namespace"],
        "name": m["name"],
        "uid": m["uid"],
        "apiVersion": "v1",
        "resourceVersion": m.get("resourceVersion", ""),
    }
