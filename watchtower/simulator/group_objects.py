"""Gang objects as the API server serves them: upstream Workload and PodGroup, and a PaddleJob's status as
paddle-operator writes it.

Shapes from: kubernetes/kubernetes staging/src/k8s.io/api/scheduling/v1alpha2/types.go (Workload
spec.podGroupTemplates[].schedulingPolicy.gang.minCount, PodGroup spec.podGroupTemplateRef.workload and
spec.schedulingPolicy, status.conditions), the 1.36 Job docs "Integrate with Workload APIs" (feature gate
WorkloadWithJob: the Job controller makes both, owned by the Job, minCount = parallelism, before any pod);
PaddleFlow/paddle-operator api/v1/paddlejob_types.go (PaddleJobStatus, ResourceStatus),
controllers/paddlejob_helper.go (getPaddleJobPhase) and controllers/paddlejob_controller.go
(syncCurrentStatus: per-role counts from the pods' phases).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from .objects import condition, new_uid, owner_ref, ts

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


def paddle_status(
    replicas: Mapping[str, int], pods: Iterable[tuple[str, str]], *, old: Mapping[str, Any], now: float
) -> dict[str, Any]:
    """Return a PaddleJob's status from its pods' (role, phase), as the operator's syncCurrentStatus does.

    A role appears only once it has a pod; the phase follows getPaddleJobPhase, read from the new counts
    (the operator reads the previous ones, then its own status write makes it reconcile again)."""
    roles: dict[str, dict[str, int]] = {}
    for role, phase in pods:
        counts = roles.setdefault(role, {})
        key = {"Pending": "pending", "Running": "running", "Failed": "failed", "Succeeded": "succeeded"}.get(
            phase
        )
        if key is not None:
            counts[key] = counts.get(key, 0) + 1

    def every(what: str) -> bool:
        return all(roles.get(r, {}).get(what, 0) == n for r, n in replicas.items())

    def some(what: str) -> bool:
        return any(c.get(what, 0) > 0 for c in roles.values())

    before = old.get("phase")
    if before in ("Completed", "Failed"):
        phase = before
    elif some("failed"):
        phase = "Failed"
    elif every("running"):
        phase = "Running"
    elif every("succeeded"):
        phase = "Completed"
    elif some("pending"):
        phase = "Pending"
    elif some("starting"):  # a Running pod not yet ready; the simulator's pods are ready once running
        phase = "Starting"
    else:
        phase = "Pending"
    status: dict[str, Any] = {"phase": phase, "mode": "PS" if "ps" in replicas else "Collective"}
    # omitempty: a zero count is not written
    status.update({role: {k: v for k, v in c.items() if v} for role, c in roles.items()})
    # getPaddleJobStartTime / getPaddleJobCompleteTime: stamped once, kept after.
    for key, when in (("startTime", ("Running",)), ("completionTime", ("Completed", "Failed"))):
        if key in old:
            status[key] = old[key]
        elif phase in when:
            status[key] = ts(now)
    return status
