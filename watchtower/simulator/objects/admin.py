"""What an administrator creates before work arrives: nodes, namespaces, priority classes, GPU quotas."""

from __future__ import annotations

from typing import Any

from .meta import new_uid, ts


def node(
    name: str,
    *,
    gpus: int = 8,
    cpu: str = "96",
    memory: str = "768Gi",
    pods: str = "110",
    unschedulable_: bool = False,
    taints: list[dict[str, str]] | None = None,
    created: float = 0.0,
) -> dict[str, Any]:
    alloc = {
        "cpu": cpu,
        "memory": memory,
        "pods": pods,
        "nvidia.com/gpu": str(gpus),
        "ephemeral-storage": "1Ti",
    }
    spec: dict[str, Any] = {}
    if unschedulable_:
        spec["unschedulable"] = True
    if taints:
        spec["taints"] = taints
    return {
        "kind": "Node",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": new_uid(f"node/{name}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(created),
            "labels": {"kubernetes.io/hostname": name, "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
        },
        "spec": spec,
        "status": {"capacity": dict(alloc), "allocatable": alloc, "conditions": []},
    }


def namespace(name: str, *, team: str | None = None) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name}
    if team:
        labels["team"] = team
    return {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "uid": new_uid(f"ns/{name}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(0),
            "labels": labels,
        },
        "spec": {"finalizers": ["kubernetes"]},
        "status": {"phase": "Active"},
    }


def priority_class(
    name: str,
    value: int,
    *,
    preemption_policy: str = "PreemptLowerPriority",
    global_default: bool = False,
    description: str = "",
) -> dict[str, Any]:
    return {
        "kind": "PriorityClass",
        "apiVersion": "scheduling.k8s.io/v1",
        "metadata": {
            "name": name,
            "uid": new_uid(f"pc/{name}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(0),
        },
        "value": value,
        "globalDefault": global_default,
        "preemptionPolicy": preemption_policy,
        "description": description,
    }


def resource_quota(namespace: str, name: str, *, hard_gpus: int, used_gpus: int) -> dict[str, Any]:
    key = "requests.nvidia.com/gpu"
    return {
        "kind": "ResourceQuota",
        "apiVersion": "v1",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": new_uid(f"rq/{namespace}/{name}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(0),
        },
        "spec": {"hard": {key: str(hard_gpus)}},
        "status": {"hard": {key: str(hard_gpus)}, "used": {key: str(used_gpus)}},
    }
