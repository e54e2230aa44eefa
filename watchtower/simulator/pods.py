"""The pods and workloads the simulated cluster holds, as the cluster and its /metrics read them."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from watchtower.simulator import objects as obj
from watchtower.simulator.forms.jobset.objects import JOBSET_API
from watchtower.simulator.workloads import Pattern, PodTemplate, WorkloadSpec

_MI = 2**20
_GI = 2**30

CONTROLLER = {
    "PaddleJob": ("paddle-operator", obj.PADDLE_API),
    "Job": ("job-controller", "batch/v1"),
    "ReplicaSet": ("replicaset-controller", "apps/v1"),
    "JobSet": ("jobset-controller", JOBSET_API),  # its pods are its child Jobs' (the job-controller's)
}


def memory_bytes(q: str) -> int:
    if q.endswith("Gi"):
        return int(q[:-2]) * _GI
    if q.endswith("Mi"):
        return int(q[:-2]) * _MI
    return int(q)


@dataclass(eq=False)
class SimPod:
    """One pod as the simulator holds it; rendered to API JSON on every change."""

    uid: str
    name: str
    namespace: str
    created: float
    template: PodTemplate
    workload: SimWorkload
    priority: int
    priority_class: str
    preemption_policy: str
    labels: dict[str, str]
    owner: dict[str, Any] | None
    grace: int
    node: str = ""
    nominated: str = ""
    phase: str = "Pending"
    sched_cond: dict[str, Any] | None = None
    disruption: dict[str, Any] | None = None
    start_time: float | None = None
    running_since: float | None = None
    pulled_at: float | None = None  # when the image pull ends and the container starts
    finished_at: float | None = None
    deletion: float | None = None  # metadata.deletionTimestamp
    gone_at: float | None = None  # when the object disappears from the API
    unschedulable_since: float | None = None
    gpu_ids: tuple[int, ...] = ()
    resource_version: int = 0
    cpu_millis: int = field(init=False, default=0)
    memory_bytes: int = field(init=False, default=0)
    # The `nvidia.com/gpu` it requests (none when it asks its GPUs through a claim) and the GPUs its
    # ResourceClaim asks (DRA): fixed by its template, and read millions of times a simulated week by the
    # scheduler and the quota, so computed once rather than as properties.
    gpus: int = field(init=False, default=0)
    dra_gpus: int = field(init=False, default=0)
    tried_at: float | None = None  # last failed scheduling attempt
    tried_generation: int = -1
    group: str = ""  # the PodGroup it names in spec.schedulingGroup.podGroupName
    scheduler: str = ""  # spec.schedulerName when not kube-scheduler's (a Volcano PaddleJob's: "volcano")
    annotations: dict[str, str] | None = None
    claim: dict[str, Any] | None = None  # the ResourceClaim made from its workload's template (DRA)
    gates: tuple[str, ...] = ()  # spec.schedulingGates: kube-scheduler leaves it alone until none is left

    def __post_init__(self) -> None:
        self.cpu_millis = int(self.template.cpu) * 1000
        self.memory_bytes = memory_bytes(self.template.memory)
        claimed = bool(self.workload.spec.claim_template)
        self.gpus = 0 if claimed else self.template.gpus
        self.dra_gpus = self.template.gpus if claimed else 0

    @property
    def terminating(self) -> bool:
        return self.deletion is not None

    @property
    def ip(self) -> str:
        """The pod IP the network plugin gives a bound pod (stable per uid)."""
        return f"10.244.{int(self.uid[:2], 16)}.{int(self.uid[2:4], 16)}" if self.node else ""

    @property
    def terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    @property
    def pattern(self) -> Pattern:
        return self.workload.spec.pattern


@dataclass(eq=False)
class SimWorkload:
    spec: WorkloadSpec
    uid: str
    created: float
    slots: dict[str, SimPod | None] = field(default_factory=dict)  # template name -> live pod
    progress: float = 0.0
    done: bool = False
    next_create: float = 0.0
    backoff: float = 10.0
    failed_create: dict[str, Any] | None = None  # the aggregated FailedCreate event
    refused_since: float | None = None
    # Its first start with every pod up, for a replay's trace (simulator/replay_trace.py): when the last pod
    # was bound, and when the last one's image was pulled and it ran.
    first_bound: float | None = None
    first_running: float | None = None
    # When people deleted it, after its quota had refused it too long (controllers.GIVE_UP_AFTER).
    deleted_at: float | None = None

    @property
    def ref(self) -> dict[str, str]:
        _, api = CONTROLLER.get(self.spec.kind, ("", "v1"))
        return {
            "kind": self.spec.kind,
            "namespace": self.spec.namespace,
            "name": self.spec.name,
            "uid": self.uid,
            "apiVersion": api,
        }
