"""Gang objects as their owners write them: a PaddleJob and what paddle-operator makes of it, upstream
Workload/PodGroup (scheduling.k8s.io/v1beta1, Kubernetes 1.37), and Volcano's PodGroup and Queue.

Field names and values come from the upstream sources named at each function; the scenarios create these
objects themselves (no operator, no Volcano scheduler runs here).
"""

from __future__ import annotations

from typing import Any

PADDLE_API = "batch.paddlepaddle.org/v1"
K8S_SCHEDULING_API = "scheduling.k8s.io/v1beta1"
VOLCANO_API = "scheduling.volcano.sh/v1beta1"

# paddle-operator api/v1/paddlejob_types.go: ResourceName, ResourceType, ResourceAnnotation.
PADDLE_RES_NAME = "paddle-res-name"
PADDLE_RES_TYPE = "paddle-res-type"
PADDLE_RESOURCE = "paddle-resource"


def paddlejob_object(
    name: str,
    *,
    workers: int,
    gpus: int,
    priority_class: str,
    image: str,
    scheduling_policy: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Return a Collective PaddleJob (workers only) as a user submits it: spec.worker.replicas and template."""
    spec: dict[str, Any] = {
        "cleanPodPolicy": "Never",
        "worker": {
            "replicas": workers,
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {
                    "priorityClassName": priority_class,
                    "containers": [
                        {
                            "name": "paddle",
                            "image": image,
                            "resources": {
                                "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                                "limits": {"nvidia.com/gpu": str(gpus)},
                            },
                        }
                    ],
                },
            },
        },
    }
    if scheduling_policy:
        spec["schedulingPolicy"] = scheduling_policy
    return {"apiVersion": PADDLE_API, "kind": "PaddleJob", "metadata": {"name": name}, "spec": spec}


def paddle_pod_name(job: str, role: str, idx: int) -> str:
    """Return the name paddle-operator gives a pod (controllers/paddlejob_helper.go genPaddleResName)."""
    return f"{job}-{role}-{idx}"


def paddle_pod(job: dict[str, Any], role: str, idx: int) -> dict[str, Any]:
    """Return the pod paddle-operator creates for role `role` index `idx` of `job` (as the server returned it).

    controllers/paddlejob_helper.go constructPod: the role's template, labels paddle-res-name (the *pod's*
    name) and paddle-res-type, annotation paddle-resource, hostname and subdomain = the pod's name;
    restartPolicy Never unless set; controllers/paddlejob_controller.go: ctrl.SetControllerReference.
    """
    name = paddle_pod_name(job["metadata"]["name"], role, idx)
    template = job["spec"][role]["template"]
    meta = {k: dict(v) for k, v in (template.get("metadata") or {}).items() if isinstance(v, dict)}
    labels = {**meta.get("labels", {}), PADDLE_RES_NAME: name, PADDLE_RES_TYPE: role}
    notes = {**meta.get("annotations", {}), PADDLE_RESOURCE: role}
    spec = {**template["spec"], "hostname": name, "subdomain": name}
    spec.setdefault("restartPolicy", "Never")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": labels,
            "annotations": notes,
            "ownerReferences": [
                {
                    "apiVersion": PADDLE_API,
                    "kind": "PaddleJob",
                    "name": job["metadata"]["name"],
                    "uid": job["metadata"]["uid"],
                    "controller": True,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": spec,
    }


def paddle_status(job: dict[str, Any], pods: list[dict[str, Any]]) -> dict[str, Any]:
    """Return the status paddle-operator writes for `job` given its pods (controllers: syncCurrentStatus).

    Per role: counts by pod phase and a reference to each pod; the job's phase is Failed/Starting/Pending
    from the first role that has such pods, Running when every role runs all its replicas, else the
    previous phase or Pending (getPaddleJobPhase); mode Collective for more than one worker and no ps.
    """
    roles = [r for r in ("ps", "worker", "heter") if job["spec"].get(r)]
    statuses: dict[str, dict[str, Any]] = {}
    for p in pods:
        role = (p["metadata"].get("annotations") or {}).get(PADDLE_RESOURCE)
        if role not in roles:
            continue
        s = statuses.setdefault(role, {"refs": []})
        phase = (p.get("status") or {}).get("phase", "Pending")
        key = {"Pending": "pending", "Running": "running", "Failed": "failed", "Succeeded": "succeeded"}.get(
            phase
        )
        if key:
            s[key] = s.get(key, 0) + 1
        meta = p["metadata"]
        s["refs"].append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "resourceVersion": meta["resourceVersion"],
                "uid": meta["uid"],
            }
        )
    phase = (job.get("status") or {}).get("phase") or "Pending"
    for s in statuses.values():
        if s.get("failed"):
            phase = "Failed"
            break
        if s.get("pending"):
            phase = "Pending"
            break
    else:
        if statuses and all(
            statuses.get(r, {}).get("running", 0) == job["spec"][r]["replicas"] for r in roles
        ):
            phase = "Running"
    mode = (
        "PS"
        if job["spec"].get("ps")
        else ("Collective" if job["spec"]["worker"]["replicas"] > 1 else "Single")
    )
    return {"phase": phase, "mode": mode, **statuses}


def k8s_workload(name: str, *, template: str, min_count: int) -> dict[str, Any]:
    """Return a scheduling.k8s.io/v1beta1 Workload with one gang template (k8s.io/api v0.37.2
    scheduling/v1beta1/types.go: spec.podGroupTemplates[].schedulingPolicy.gang.minCount, as in v1alpha2)."""
    return {
        "apiVersion": K8S_SCHEDULING_API,
        "kind": "Workload",
        "metadata": {"name": name},
        "spec": {
            "podGroupTemplates": [{"name": template, "schedulingPolicy": {"gang": {"minCount": min_count}}}]
        },
    }


def k8s_podgroup(
    name: str,
    *,
    min_count: int,
    workload: tuple[str, str] | None = None,
    priority_class: str | None = None,
) -> dict[str, Any]:
    """Return a scheduling.k8s.io/v1beta1 PodGroup with a gang policy, made from `workload`'s template
    (name, template) when given (k8s.io/api v0.37.2 scheduling/v1beta1/types.go: spec.workloadRef
    {workloadName, templateName}, where v1alpha2 had spec.podGroupTemplateRef.workload)."""
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": min_count}}}
    if workload:
        spec["workloadRef"] = {"workloadName": workload[0], "templateName": workload[1]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": K8S_SCHEDULING_API, "kind": "PodGroup", "metadata": {"name": name}, "spec": spec}


def volcano_queue(
    name: str, *, weight: int, capability: dict[str, str], deserved: dict[str, str], guarantee: dict[str, str]
) -> dict[str, Any]:
    """Return a Volcano Queue (volcano.sh/apis pkg/apis/scheduling/v1beta1/types.go QueueSpec)."""
    return {
        "apiVersion": VOLCANO_API,
        "kind": "Queue",
        "metadata": {"name": name},
        "spec": {
            "weight": weight,
            "reclaimable": True,
            "capability": capability,
            "deserved": deserved,
            "guarantee": {"resource": guarantee},
        },
    }


VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # paddle-operator schedulingPodGroupAnnotation


def volcano_fit_error(*, pending: int, min_available: int) -> str:
    """Return Volcano's JobInfo.FitError for a gang whose `pending` tasks were never tried (not enqueued).

    volcano pkg/scheduler/api/job_info.go FitError: "pod group is not ready", the sorted histogram of task
    statuses and minAvailable, then "; Pending: <n> Unschedulable" (TaskSchedulingReason of a pending task
    with no fit error is Unschedulable).
    """
    histogram = ", ".join(sorted([f"{pending} Pending", f"{min_available} minAvailable"]))
    return f"pod group is not ready, {histogram}; Pending: {pending} Unschedulable"


def volcano_podgroup(
    name: str,
    *,
    min_member: int,
    queue: str,
    priority_class: str,
    min_resources: dict[str, str],
    pending: int,
    transition_id: str,
    at: str,
) -> dict[str, Any]:
    """Return a Volcano PodGroup left Pending in its queue, with the Unschedulable condition Volcano's gang
    plugin writes (pkg/scheduler/plugins/gang/gang.go OnSessionClose: "<minAvailable - ready>/<tasks> tasks
    in gang unschedulable: <FitError>", reason NotEnoughResources, type Unschedulable, status True, the
    session uid as transitionID). Shaped from Volcano's source; the real vc-scheduler wrote the same
    (tests/fixtures/real/volcano-real-podgroup-pending.json, by capture_volcano.py).
    """
    message = f"{min_member}/{pending} tasks in gang unschedulable: " + volcano_fit_error(
        pending=pending, min_available=min_member
    )
    return {
        "apiVersion": VOLCANO_API,
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "minMember": min_member,
            "minResources": min_resources,
            "queue": queue,
            "priorityClassName": priority_class,
        },
        "status": {
            "phase": "Pending",
            "conditions": [
                {
                    "type": "Unschedulable",
                    "status": "True",
                    "transitionID": transition_id,
                    "lastTransitionTime": at,
                    "reason": "NotEnoughResources",
                    "message": message,
                }
            ],
        },
    }
