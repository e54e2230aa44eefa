"""Which workload a pod belongs to (DESIGN §3.10)."""

from __future__ import annotations

from typing import NamedTuple

from .model import Pod

PADDLE_GROUP = "batch.paddlepaddle.org"
VOLCANO_GROUP = "batch.volcano.sh"
VOLCANO_JOB_LABEL = "volcano.sh/job-name"
JOB_NAME_LABELS = ("batch.kubernetes.io/job-name", "job-name")
# Labels the decoder must keep for grouping. `paddle-res-name` is deliberately absent: it names the pod.
WORKLOAD_LABELS = frozenset({VOLCANO_JOB_LABEL, *JOB_NAME_LABELS})


class WorkloadKey(NamedTuple):
    """A tuple, so that hashing and ordering run in C: every index and every tick is keyed by it."""

    namespace: str
    kind: str  # PaddleJob, VolcanoJob, Job, ReplicaSet, ..., or Pod for a bare pod
    name: str

    @property
    def gang(self) -> bool:
        """A gang waits until all its pods are scheduled (PaddleJob, Volcano job)."""
        return self.kind in ("PaddleJob", "VolcanoJob")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.kind}/{self.name}"


def workload_of(pod: Pod) -> WorkloadKey:
    """Return the workload of a pod: its controller first, then job labels, else the pod itself."""
    ns = pod.namespace
    owner = pod.owner
    if owner is not None and owner.name:
        group = owner.group
        if owner.kind == "PaddleJob" and group in (PADDLE_GROUP, ""):
            return WorkloadKey(ns, "PaddleJob", owner.name)
        if owner.kind == "Job" and group == VOLCANO_GROUP:
            return WorkloadKey(ns, "VolcanoJob", owner.name)
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
    return WorkloadKey(ns, "Pod", pod.name)
