"""API objects shaped exactly as kube-apiserver serves them (JSON-ready dicts).

Used by the simulator to feed the same decoder the Kubernetes adapter feeds, and by tests to build
real-shaped objects. Field names, nesting, time formats and condition shapes follow core/v1.

Over 400 lines: one small builder per kind the simulator serves (pods, events, nodes, quotas, Jobs,
ReplicaSets, PaddleJobs, ...); kept in one module so the wire shapes are checked against the API in one place.
"""

from __future__ import annotations

import uuid as _uuid
from datetime import UTC, datetime
from typing import Any

PADDLE_API = "batch.paddlepaddle.org/v1"


def ts(t: float | None) -> str | None:
    """metav1.Time: RFC 3339, second precision, UTC with Z."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_ts(t: float) -> str:
    """metav1.MicroTime, as eventTime is written."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_uid(seed: str | None = None) -> str:
    return str(_uuid.uuid5(_uuid.NAMESPACE_URL, seed)) if seed is not None else str(_uuid.uuid4())


def owner_ref(kind: str, name: str, *, api_version: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def condition(
    type_: str, status: str, at: float, *, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    c: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": ts(at)}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


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


def scheduled(at: float) -> dict[str, Any]:
    return condition("PodScheduled", "True", at)


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


def core_event(
    *,
    namespace: str,
    reason: str,
    message: str,
    involved: dict[str, str],
    at: float,
    last: float | None = None,
    count: int = 1,
    type_: str = "Normal",
    component: str = "",
    related: dict[str, str] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event as older controllers write it (firstTimestamp/lastTimestamp/count)."""
    ev: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": name or f"{involved.get('name', 'x')}.{int(at * 1000):x}",
            "namespace": namespace,
            "uid": new_uid(f"ev/{namespace}/{name}/{reason}/{at}/{message}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(at),
        },
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message,
        "source": {"component": component} if component else {},
        "firstTimestamp": ts(at),
        "lastTimestamp": ts(last if last is not None else at),
        "count": count,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "",
    }
    if related:
        ev["related"] = dict(related)
    return ev


def scheduler_event(
    *,
    namespace: str,
    reason: str,
    note: str,
    regarding: dict[str, str],
    at: float,
    related: dict[str, str] | None = None,
    type_: str = "Normal",
    series_count: int | None = None,
    series_last: float | None = None,
) -> dict[str, Any]:
    """An event as kube-scheduler writes it through events.k8s.io/v1, read back through core/v1."""
    ev: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": f"{regarding.get('name', 'x')}.{int(at * 1e6):x}",
            "namespace": namespace,
            "uid": new_uid(f"sev/{namespace}/{regarding.get('uid')}/{reason}/{at}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(at),
        },
        "involvedObject": dict(regarding),
        "reason": reason,
        "message": note,
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": micro_ts(at),
        "type": type_,
        "action": "Scheduling" if reason != "Preempted" else "Preempting",
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-control-plane",
    }
    if related:
        ev["related"] = dict(related)
    if series_count:
        ev["series"] = {"count": series_count, "lastObservedTime": micro_ts(series_last or at)}
    return ev


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


def object_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The List `kubectl get a,b,c -A -o json` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}


# ---- controllers: the pods a Job, a ReplicaSet or a PaddleJob would make --------------------------------


def pod_template(
    *,
    gpus: int = 1,
    cpu: str = "4",
    memory: str = "32Gi",
    priority_class: str | None = None,
    image: str = "paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6",
    labels: dict[str, str] | None = None,
    grace: int = 30,
) -> dict[str, Any]:
    """A controller's spec.template: a pod's spec as the user wrote it, before admission fills it in."""
    spec = pod(name="", namespace="", created=0, gpus=gpus, cpu=cpu, memory=memory, image=image, grace=grace)[
        "spec"
    ]
    # Written on the pod by admission (Priority, DefaultTolerationSeconds), never in a template.
    for key in ("priority", "preemptionPolicy", "tolerations"):
        del spec[key]
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"metadata": {"labels": dict(labels or {})}, "spec": spec}


def _controller_meta(name: str, namespace: str, created: float, uid: str | None, rv: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": namespace,
        "uid": uid or new_uid(f"{namespace}/{name}/{created}"),
        "resourceVersion": rv,
        "generation": 1,
        "creationTimestamp": ts(created),
    }


def job(
    *,
    name: str,
    namespace: str,
    created: float,
    template: dict[str, Any],
    uid: str | None = None,
    parallelism: int = 1,
    completions: int | None = 1,
    succeeded: int = 0,
    suspend: bool = False,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A batch/v1 Job as the API server returns it once the Job controller has seen it."""
    meta = _controller_meta(name, namespace, created, uid, resource_version)
    selector = {"batch.kubernetes.io/controller-uid": meta["uid"]}
    tpl = {**template, "metadata": {**template.get("metadata", {})}}
    tpl["metadata"]["labels"] = {
        **tpl["metadata"].get("labels", {}),
        **selector,
        "batch.kubernetes.io/job-name": name,
        "controller-uid": meta["uid"],
        "job-name": name,
    }
    spec: dict[str, Any] = {
        "parallelism": parallelism,
        "backoffLimit": 6,
        "completionMode": "NonIndexed",
        "manualSelector": False,
        "podReplacementPolicy": "TerminatingOrFailed",
        "selector": {"matchLabels": selector},
        "suspend": suspend,
        "template": tpl,
    }
    if completions is not None:
        spec["completions"] = completions
    status: dict[str, Any] = {"active": 0, "ready": 0, "terminating": 0, "uncountedTerminatedPods": {}}
    if not suspend:
        status["startTime"] = ts(created)
    if succeeded:
        status["succeeded"] = succeeded
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": spec, "status": status}


def replica_set(
    *,
    name: str,
    namespace: str,
    created: float,
    template: dict[str, Any],
    uid: str | None = None,
    replicas: int = 1,
    deployment: str | None = None,
    resource_version: str = "1",
) -> dict[str, Any]:
    """An apps/v1 ReplicaSet; made by a Deployment (named `<deployment>-<hash>`) when `deployment` is given."""
    meta = _controller_meta(name, namespace, created, uid, resource_version)
    labels = dict(template.get("metadata", {}).get("labels", {}))
    if deployment:
        labels["pod-template-hash"] = name.rsplit("-", 1)[-1]
        meta["ownerReferences"] = [
            owner_ref(
                "Deployment",
                deployment,
                api_version="apps/v1",
                uid=new_uid(f"deploy/{namespace}/{deployment}"),
            )
        ]
        meta["annotations"] = {
            "deployment.kubernetes.io/desired-replicas": str(replicas),
            "deployment.kubernetes.io/max-replicas": str(replicas + 1),
            "deployment.kubernetes.io/revision": "1",
        }
    meta["labels"] = labels
    return {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": meta,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {**template, "metadata": {"labels": labels}},
        },
        "status": {"replicas": 0, "observedGeneration": 1},
    }


def paddle_job_object(
    *,
    name: str,
    namespace: str,
    created: float,
    roles: dict[str, tuple[int, dict[str, Any]]],
    uid: str | None = None,
    resource_version: str = "1",
) -> dict[str, Any]:
    """A PaddleJob (batch.paddlepaddle.org/v1): per role (ps, worker, heter) its replicas and pod template."""
    spec: dict[str, Any] = {"cleanPodPolicy": "OnCompletion", "intranet": "PodIP", "withGloo": 1}
    for role, (replicas, template) in roles.items():
        spec[role] = {"replicas": replicas, "template": template}
    return {
        "apiVersion": PADDLE_API,
        "kind": "PaddleJob",
        "metadata": _controller_meta(name, namespace, created, uid, resource_version),
        "spec": spec,
        "status": {"phase": "Pending", "mode": "PS"},
    }
