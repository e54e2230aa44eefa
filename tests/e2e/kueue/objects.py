"""Kueue objects the scenarios create (kueue.x-k8s.io/v1beta2 of v0.17.0, apis/kueue/v1beta2) and the Jobs
Kueue manages, with what the test API needs to read them back."""

from __future__ import annotations

from typing import Any

from tests.e2e.api import Api, wait_for
from tests.e2e.scenario import pod_manifest

KUEUE_API = "kueue.x-k8s.io/v1beta2"
ROOT = f"/apis/{KUEUE_API}"
# pkg/controller/constants/constants.go QueueLabel, and WorkloadPriorityClassLabel.
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
RESOURCES = ("cpu", "memory", "nvidia.com/gpu")


def resource_flavor(name: str) -> dict[str, Any]:
    return {"apiVersion": KUEUE_API, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def cluster_queue(name: str, *, flavor: str, gpus: int, cohort: str | None = None) -> dict[str, Any]:
    """A ClusterQueue of `gpus` nominal GPUs (CPU and memory ample) that preempts lower priorities within."""
    quotas = {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": str(gpus)}
    spec: dict[str, Any] = {
        "namespaceSelector": {},
        "resourceGroups": [
            {
                "coveredResources": list(RESOURCES),
                "flavors": [
                    {"name": flavor, "resources": [{"name": r, "nominalQuota": quotas[r]} for r in RESOURCES]}
                ],
            }
        ],
        "preemption": {"withinClusterQueue": "LowerPriority"},
    }
    if cohort:
        spec["cohortName"] = cohort
    return {"apiVersion": KUEUE_API, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name: str, *, cluster_queue: str) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "LocalQueue",
        "metadata": {"name": name},
        "spec": {"clusterQueue": cluster_queue},
    }


def workload_priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": KUEUE_API,
        "kind": "WorkloadPriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": "e2e",
    }


def queued_job(
    name: str,
    *,
    queue: str,
    pods: int,
    gpus: int,
    priority_class: str,
    workload_priority_class: str | None = None,
    **kw: Any,
) -> dict[str, Any]:
    """A batch/v1 Job of `pods` pods × `gpus` GPUs, as Kueue's Job webhook leaves it: suspended, queue-labelled.

    `kw` goes to the pod template (`pod_manifest`: run_seconds, terminate_seconds...).
    """
    template = pod_manifest(name, gpus=gpus, priority_class=priority_class, **kw)
    del template["metadata"]["name"]
    labels = {QUEUE_LABEL: queue}
    if workload_priority_class:
        labels[PRIORITY_CLASS_LABEL] = workload_priority_class
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "suspend": True,
            "parallelism": pods,
            "completions": pods,
            "backoffLimit": 6,
            "template": template,
        },
    }


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def is_true(obj: dict[str, Any], type_: str) -> bool:
    c = condition(obj, type_)
    return c is not None and c["status"] == "True"


def workload_of(api: Api, ns: str, job: dict[str, Any]) -> dict[str, Any] | None:
    """Return the Workload Kueue made for `job` (its controller owner is the Job), or None yet."""
    uid = job["metadata"]["uid"]
    for w in api.items(f"{ROOT}/namespaces/{ns}/workloads"):
        for ref in w["metadata"].get("ownerReferences") or []:
            if ref.get("uid") == uid and ref.get("controller"):
                return w
    return None


def wait_workload(
    api: Api, ns: str, job: dict[str, Any], what: str, probe: Any, timeout: float = 60.0
) -> Any:
    """Wait until `probe(workload)` is truthy for `job`'s Workload; return the Workload."""

    def check() -> dict[str, Any] | None:
        w = workload_of(api, ns, job)
        return w if w is not None and probe(w) else None

    return wait_for(f"{job['metadata']['name']}'s Workload {what}", check, timeout=timeout)
