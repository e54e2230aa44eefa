"""Controllers and what they make pods from: Jobs, ReplicaSets, PaddleJobs and their pod templates."""

from __future__ import annotations

from typing import Any

from .meta import new_uid, owner_ref, ts
from .pods import pod

PADDLE_API = "batch.paddlepaddle.org/v1"


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


def controller_meta(name: str, namespace: str, created: float, uid: str | None, rv: str) -> dict[str, Any]:
    """A controller's metadata as the API server returns it after creation (generation 1)."""
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
    meta = controller_meta(name, namespace, created, uid, resource_version)
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
    meta = controller_meta(name, namespace, created, uid, resource_version)
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
        "metadata": controller_meta(name, namespace, created, uid, resource_version),
        "spec": spec,
        "status": {"phase": "Pending", "mode": "PS"},
    }
