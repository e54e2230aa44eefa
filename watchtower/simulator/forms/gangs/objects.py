"""Upstream gang objects as the API server serves them: the 1.36 Workload and PodGroup.

Shapes from: kubernetes/kubernetes staging/src/k8s.io/api/scheduling/v1alpha2/types.go (Workload
spec.podGroupTemplates[].schedulingPolicy.gang.minCount, PodGroup spec.podGroupTemplateRef.workload and
spec.schedulingPolicy, status.conditions), the 1.36 Job docs "Integrate with Workload APIs" (feature gate
WorkloadWithJob: the Job controller makes both, owned by the Job, minCount = parallelism, before any pod).
"""

from __future__ import annotations

from typing import Any

from watchtower.simulator.objects import condition, new_uid, owner_ref, ts

GROUP_API = "scheduling.k8s.io/v1alpha2"
# Read by Watchtower as "the gang was placed" (adapters/kube/forms/gangs.py SCHEDULED_CONDITIONS).
POD_GROUP_SCHEDULED = "PodGroupScheduled"
GANG_TEMPLATE = "workers"


def _meta(
    name: str, namespace: str | None, created: float, uid: str, owner: dict[str, Any] | None
) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "resourceVersion": "1",
        "creationTimestamp": ts(created),
    }
    if namespace is not None:
        meta["namespace"] = namespace
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return meta


def gang_workload(
    *, name: str, namespace: str, created: float, min_count: int, job_uid: str
) -> dict[str, Any]:
    """The Workload the 1.36 Job controller makes for an Indexed Job: one gang template."""
    return {
        "apiVersion": GROUP_API,
        "kind": "Workload",
        "metadata": _meta(
            name,
            namespace,
            created,
            new_uid(f"workload/{namespace}/{name}/{job_uid}"),
            owner_ref("Job", name, api_version="batch/v1", uid=job_uid),
        ),
        "spec": {
            "controllerRef": {"apiGroup": "batch", "kind": "Job", "name": name},
            "podGroupTemplates": [
                {"name": GANG_TEMPLATE, "schedulingPolicy": {"gang": {"minCount": min_count}}}
            ],
        },
    }


def pod_group(
    *, name: str, namespace: str, created: float, min_count: int, job: str, job_uid: str
) -> dict[str, Any]:
    """A 1.36 PodGroup made from the Workload's template, with no status until the scheduler writes one."""
    return {
        "apiVersion": GROUP_API,
        "kind": "PodGroup",
        "metadata": _meta(
            name,
            namespace,
            created,
            new_uid(f"podgroup/{namespace}/{name}/{job_uid}"),
            owner_ref("Job", job, api_version="batch/v1", uid=job_uid),
        ),
        "spec": {
            "podGroupTemplateRef": {"workload": {"workloadName": job, "podGroupTemplateName": GANG_TEMPLATE}},
            "schedulingPolicy": {"gang": {"minCount": min_count}},
        },
        "status": {},
    }


def pod_group_condition(at: float, *, scheduled: bool, message: str = "") -> dict[str, Any]:
    """The PodGroup condition kube-scheduler writes: True once placed, False with its words until then."""
    if scheduled:
        return condition(POD_GROUP_SCHEDULED, "True", at, reason="Scheduled")
    return condition(POD_GROUP_SCHEDULED, "False", at, reason="Unschedulable", message=message)
