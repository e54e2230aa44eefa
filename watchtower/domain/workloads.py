"""Which workload a pod belongs to (DESIGN §3.10, §3.17)."""

from __future__ import annotations

from typing import NamedTuple

from watchtower.domain.forms.gangs.records import REF_WORKLOAD
from watchtower.domain.forms.gated.records import KUEUE_POD_GROUP_LABEL
from watchtower.domain.forms.kueue.records import KUEUE_WORKLOAD_KIND
from watchtower.domain.records import Controller, OwnerRef, Pod, api_group

VOLCANO_GROUP = "batch.volcano.sh"
VOLCANO_JOB_LABEL = "volcano.sh/job-name"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
# Set by the Deployment controller on the ReplicaSets it makes and their pods: the ReplicaSet is named
# `<deployment>-<hash>`, and the user knows the Deployment. The decoder reads it into the pod's OwnerRef.
TEMPLATE_HASH_LABEL = "pod-template-hash"
# Set by the JobSet controller on its child Jobs and their pods (kubernetes-sigs/jobset
# api/jobset/v1alpha2/jobset_types.go JobSetNameKey; its siblings replicatedjob-name, job-index, job-key
# name the child Job, not the workload). It wins over the pod's Job owner: one JobSet is one workload.
JOBSET_NAME_LABEL = "jobset.sigs.k8s.io/jobset-name"
JOBSET_GROUP = "jobset.x-k8s.io"
# A TrainJob (kubeflow/trainer pkg/runtime/framework/plugins/jobset/jobset.go) makes one JobSet of its own
# name that it controls; its pods carry no TrainJob label, so the TrainJob is known from the JobSet's owner.
TRAINJOB_GROUP = "trainer.kubeflow.org"
# Labels the decoder must keep for grouping. `paddle-res-name` is deliberately absent: it names the pod.
WORKLOAD_LABELS = frozenset({VOLCANO_JOB_LABEL, JOBSET_NAME_LABEL, KUEUE_POD_GROUP_LABEL, *JOB_NAME_LABELS})


# PodGroup / Workload: bare pods that name their gang (upstream or Volcano) are that group's workload.
GANG_KINDS = frozenset({"PaddleJob", "VolcanoJob", "PodGroup", "Workload"})


class WorkloadKey(NamedTuple):
    """A tuple, so that hashing and ordering run in C: every index and every tick is keyed by it."""

    namespace: str
    kind: str  # PaddleJob, VolcanoJob, JobSet, TrainJob, Job, ReplicaSet, ..., or Pod for a bare pod
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
    """Return the workload of a pod: its JobSet, else its controller (a Deployment above its ReplicaSet),
    then job labels, else the pod itself. A TrainJob above the JobSet is ClusterState's to know."""
    ns = pod.namespace
    jobset = pod.labels.get(JOBSET_NAME_LABEL)
    if jobset:
        return WorkloadKey(ns, "JobSet", jobset)
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
    kueue_group = labels.get(KUEUE_POD_GROUP_LABEL)
    if kueue_group:
        # A Kueue plain-pod group: Kueue's Workload is named after the group and has no controller owner,
        # so it is keyed as its own (forms/kueue/tables.py own_key): the pods and it meet under that key.
        return WorkloadKey(ns, KUEUE_WORKLOAD_KIND, kueue_group)
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
    """Return the workload a controller's pods belong to, one step up: the Deployment of a ReplicaSet,
    the JobSet of a child Job, the TrainJob of a JobSet; else itself.

    The same key `workload_of` gives its pods, so that a refusal and the pods made later are one workload.
    A child Job of a TrainJob's JobSet takes two steps: ControllerPart.workload_of_controller (state.control) chains them.
    """
    owner = c.owner
    if owner is not None and owner.name:
        up = _ABOVE.get((c.kind, owner.kind))
        if up is not None and (up[1] == "" or api_group(owner.api_version) == up[1]):
            return WorkloadKey(c.namespace, up[0], owner.name)
    return WorkloadKey(c.namespace, c.kind, c.name)


# (controller kind, owner kind) → (workload kind, the owner's API group, "" for any).
_ABOVE = {
    ("ReplicaSet", "Deployment"): ("Deployment", ""),
    ("Job", "JobSet"): ("JobSet", JOBSET_GROUP),
    ("JobSet", "TrainJob"): ("TrainJob", TRAINJOB_GROUP),
}
