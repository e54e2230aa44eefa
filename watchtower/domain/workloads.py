"""Which workload a pod belongs to (DESIGN §3.10, §3.17)."""

from __future__ import annotations

from typing import NamedTuple

from .gangs import REF_WORKLOAD
from .model import Controller, OwnerRef, Pod, api_group

VOLCANO_GROUP = "batch.volcano.sh"
VOLCANO_JOB_LABEL = "volcano.sh/job-name"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
# Set by the Deployment controller on the ReplicaSets it makes and their pods: the ReplicaSet is named
# `<deployment>-<hash>`, and the user knows the Deployment. The decoder reads it into the pod's OwnerRef.
TEMPLATE_HASH_LABEL = "pod-template-hash"
# Labels the decoder must keep for grouping. `paddle-res-name` is deliberately absent: it names the pod.
WORKLOAD_LABELS = frozenset({VOLCANO_JOB_LABEL, *JOB_NAME_LABELS})


# PodGroup / Workload: bare pods that name their gang (upstream or Volcano) are that group's workload.
GANG_KINDS = frozenset({"PaddleJob", "VolcanoJob", "PodGroup", "Workload"})


class WorkloadKey(NamedTuple):
    """A tuple, so that hashing and ordering run in C: every index and every tick is keyed by it."""

    namespace: str
    kind: str  # PaddleJob, VolcanoJob, Job, ReplicaSet, ..., or Pod for a bare pod
    name: str

    @property
    def gang(self) -> bool:
        """A gang waits until all its pods are scheduled (PaddleJob, Volcano job)."""
        return self.kind in GANG_KINDS

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


def workload_kind(kind: str, api_version: str) -> str:
    """Return the workload kind of a controller: Volcano's `Job` is told from batch/v1's by its group.

    Pods (by their owner) and FailedCreate events (by the object they are about) both go through here,
    so that a quota refusal lands on the same workload as the job's pods.
    """
    if kind == "Job" and api_group(api_version) == VOLCANO_GROUP:
        return "VolcanoJob"
    return kind


def _deployment_of(owner: OwnerRef) -> str:
    """Return the Deployment a ReplicaSet `<deployment>-<hash>` belongs to, or "" when it is no such one."""
    template_hash = owner.template_hash
    if template_hash and owner.name.endswith("-" + template_hash):
        return owner.name[: -len(template_hash) - 1]
    return ""


def workload_of(pod: Pod) -> WorkloadKey:
    """Return the workload of a pod: its controller first (a Deployment above its ReplicaSet), then job
    labels, else the pod itself."""
    ns = pod.namespace
    owner = pod.owner
    if owner is not None and owner.name:
        if owner.kind == "Job":
            return WorkloadKey(ns, workload_kind("Job", owner.api_version), owner.name)
        if owner.kind == "ReplicaSet":
            deployment = _deployment_of(owner)
            if deployment:
                return WorkloadKey(ns, "Deployment", deployment)
        if owner.kind != "Node":  # static (mirror) pods are owned by their Node: treat them as bare pods
            return WorkloadKey(ns, owner.kind, owner.name)
    labels = pod.labels
    vj = labels.get(VOLCANO_JOB_LABEL)
    if vj:
        return WorkloadKey(ns, "VolcanoJob", vj)
    for key in JOB_NAME_LABELS:
        job = labels.get(key)
        if job:
            return WorkloadKey(ns, "Job", job)
    group = pod.group
    if group is not None:
        # A bare pod that names its gang: the group is what the user made, and what waits.
        return WorkloadKey(ns, "Workload" if group.source == REF_WORKLOAD else "PodGroup", group.name)
    return WorkloadKey(ns, "Pod", pod.name)


def workload_of_controller(c: Controller) -> WorkloadKey:
    """Return the workload a controller's pods belong to: the Deployment of a ReplicaSet, else itself.

    The same key `workload_of` gives its pods, so that a refusal and the pods made later are one workload.
    """
    owner = c.owner
    if c.kind == "ReplicaSet" and owner is not None and owner.kind == "Deployment" and owner.name:
        return WorkloadKey(c.namespace, "Deployment", owner.name)
    return WorkloadKey(c.namespace, c.kind, c.name)
