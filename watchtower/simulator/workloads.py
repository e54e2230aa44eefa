"""What the simulated teams submit: the PriorityClasses, workload shapes, Poisson arrivals and durations."""

from __future__ import annotations

import random
from dataclasses import dataclass, field, replace
from enum import StrEnum


@dataclass(frozen=True, slots=True)
class ClassSpec:
    name: str
    value: int
    preemption_policy: str = "PreemptLowerPriority"
    description: str = ""


# DESIGN §4: the classes such clusters run with.
PRIORITY_CLASSES = (
    ClassSpec("urgent-debug", 1_000_000, description="Interactive debugging of production incidents."),
    ClassSpec("online-serving", 900_000, description="Online inference serving user traffic."),
    ClassSpec("experiment", 500_000, description="Short research experiments."),
    # Kubernetes' own example of a non-preempting class: ahead in the queue, but never evicts running work.
    ClassSpec(
        "sweep",
        500_000,
        "Never",
        description="Hyperparameter sweeps; queue ahead of training, never preempt.",
    ),
    ClassSpec(
        "long-training", 300_000, "Never", description="Multi-day training; queues but never preempts."
    ),
    ClassSpec("batch", 100_000, description="Best-effort batch work; first to be preempted."),
)
CLASS_BY_NAME = {c.name: c for c in PRIORITY_CLASSES}

PADDLE_IMAGE = "paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6"
SERVING_IMAGE = "paddlepaddle/serving:0.9.0-cuda11.2-cudnn8"
DEBUG_IMAGE = "nvcr.io/nvidia/pytorch:24.05-py3"


class Pattern(StrEnum):
    """How a workload uses its GPUs, for the exporter's utilisation series."""

    BUSY = "busy"  # training: high, steady
    BURSTY = "bursty"  # inference: follows traffic
    IDLE = "idle"  # a notebook left open, a stuck job


@dataclass(frozen=True, slots=True)
class PodTemplate:
    name: str
    role: str  # ps, worker, server, main
    gpus: int
    cpu: str
    memory: str
    image: str


@dataclass(frozen=True, slots=True)
class WorkloadSpec:
    """One submission. kind is PaddleJob, ReplicaSet, Job, JobSet or Pod (a bare pod)."""

    kind: str
    name: str
    namespace: str
    team: str
    priority_class: str
    pods: tuple[PodTemplate, ...]
    duration: float  # seconds of running with every pod up before it completes
    grace: int  # terminationGracePeriodSeconds
    pattern: Pattern = Pattern.BUSY
    labels: dict[str, str] = field(default_factory=dict)
    # An Indexed Job the 1.36 Job controller gang-schedules (WorkloadWithJob): a Workload and a PodGroup
    # with minCount = its pods, which name the group in spec.schedulingGroup.
    pod_group: bool = False
    # A PaddleJob with spec.schedulingPolicy: gang-scheduled by Volcano in this queue (its own PodGroup).
    volcano_queue: str = ""
    train_job: bool = False  # a JobSet a TrainJob (kubeflow trainer) made and controls
    # Its pods ask their GPUs through a claim made from this ResourceClaimTemplate (DRA), not nvidia.com/gpu.
    claim_template: str = ""
    # A Job queued by Kueue in this LocalQueue: created suspended, its pods made once Kueue admits it;
    # its Workload names `kueue_class` (a WorkloadPriorityClass).
    kueue_queue: str = ""
    kueue_class: str = ""

    @property
    def gang(self) -> bool:
        return self.kind == "PaddleJob" or self.pod_group

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.pods)


def team_namespace(team: str) -> str:
    return f"team-{team}"


def paddle_job(
    *,
    name: str,
    team: str,
    priority_class: str,
    workers: int,
    gpus_per_worker: int,
    duration: float,
    pattern: Pattern = Pattern.BUSY,
    grace: int = 600,
    volcano_queue: str = "",
) -> WorkloadSpec:
    """A PaddleJob gang: one CPU-only parameter server and `workers` GPU workers.

    The grace period is the time a preempted worker has to checkpoint: minutes for a large model.
    With `volcano_queue` it is a Collective job (workers only) Volcano gang-schedules in that queue."""
    pods = [] if volcano_queue else [PodTemplate(f"{name}-ps-0", "ps", 0, "8", "32Gi", PADDLE_IMAGE)]
    pods += [
        PodTemplate(
            f"{name}-worker-{i}", "worker", gpus_per_worker, str(6 * gpus_per_worker), "96Gi", PADDLE_IMAGE
        )
        for i in range(workers)
    ]
    return WorkloadSpec(
        "PaddleJob",
        name,
        team_namespace(team),
        team,
        priority_class,
        tuple(pods),
        duration,
        grace=grace,
        pattern=pattern,
        volcano_queue=volcano_queue,
    )


def jobset(
    *,
    name: str,
    team: str,
    priority_class: str,
    replicated_jobs: dict[str, int],
    pods_per_job: int,
    gpus: int,
    duration: float,
    train_job: bool = False,
) -> WorkloadSpec:
    """A JobSet: per replicatedJob its replicas, each a Job of `pods_per_job` pods (role = replicatedJob).

    Template names are the pods' `<jobset>-<replicatedJob>-<job index>-<completion index>`."""
    pods = tuple(
        PodTemplate(f"{name}-{rj}-{j}-{i}", rj, gpus, str(6 * gpus or 2), "64Gi", PADDLE_IMAGE)
        for rj, replicas in replicated_jobs.items()
        for j in range(replicas)
        for i in range(pods_per_job)
    )
    return WorkloadSpec(
        "JobSet", name, team_namespace(team), team, priority_class, pods, duration, 30, train_job=train_job
    )


def single_pod(
    *,
    kind: str,
    name: str,
    team: str,
    priority_class: str,
    gpus: int,
    duration: float,
    replicas: int = 1,
    pattern: Pattern = Pattern.BUSY,
    image: str = PADDLE_IMAGE,
    grace: int = 30,
    pod_group: bool = False,
) -> WorkloadSpec:
    """A ReplicaSet, a Job or a bare Pod; pods are named by the controller (`<name>-<suffix>`) later.

    `pod_group`: an Indexed Job gang-scheduled through the 1.36 Workload API."""
    pods = tuple(
        PodTemplate(name if kind == "Pod" else f"{name}-{i}", "main", gpus, str(6 * gpus or 2), "64Gi", image)
        for i in range(replicas)
    )
    return WorkloadSpec(
        kind,
        name,
        team_namespace(team),
        team,
        priority_class,
        pods,
        duration,
        grace,
        pattern,
        pod_group=pod_group and kind == "Job",
    )


def dra_job(
    *, name: str, team: str, priority_class: str, gpus: int, replicas: int, duration: float
) -> WorkloadSpec:
    """A Job whose pods ask `gpus` each through a claim made from a ResourceClaimTemplate (DRA)."""
    spec = single_pod(
        kind="Job",
        name=name,
        team=team,
        priority_class=priority_class,
        gpus=gpus,
        replicas=replicas,
        duration=duration,
        image=DEBUG_IMAGE,
    )
    return replace(spec, claim_template=f"h100-x{gpus}")


@dataclass
class WorkloadGenerator:
    """Draws submissions from a seeded random source: which team, which tier, how big, for how long."""

    rng: random.Random
    teams: list[str]
    gpus_per_node: int = 8
    _serial: int = 0

    def _name(self, stem: str) -> str:
        self._serial += 1
        return f"{stem}-{self._serial:04d}"

    def gap(self, arrivals_per_hour: float) -> float:
        """Return the time to the next arrival (exponential: a Poisson process)."""
        if arrivals_per_hour <= 0:
            return float("inf")
        return self.rng.expovariate(arrivals_per_hour / 3600.0)

    def any(self) -> WorkloadSpec:
        """Return a submission drawn from the usual mix.

        Sized so that the default 40 arrivals an hour ask for about the GPU-hours a 12-node cluster has:
        contention without a queue that only grows."""
        r = self.rng.random()
        if r < 0.15:
            return self.training(self.rng.choice(["long-training", "batch"]))
        if r < 0.50:
            return self.experiment()
        if r < 0.75:
            return self.batch_job()
        if r < 0.85:
            return self.serving()
        return self.debug()

    def _team(self, team: str | None) -> str:
        return team if team is not None else self.rng.choice(self.teams)

    def training(
        self,
        priority_class: str,
        *,
        team: str | None = None,
        workers: int | None = None,
        gpus_per_worker: int | None = None,
        duration: float | None = None,
    ) -> WorkloadSpec:
        g = self.gpus_per_node
        per = gpus_per_worker or self.rng.choice([max(1, g // 4), max(1, g // 2)])
        return paddle_job(
            name=self._name("train"),
            team=self._team(team),
            priority_class=priority_class,
            workers=workers or self.rng.randint(2, 3),
            gpus_per_worker=min(per, g),
            duration=duration or self.rng.uniform(0.5, 1.5) * 3600,
            pattern=Pattern.IDLE if self.rng.random() < 0.1 else Pattern.BUSY,
        )

    def experiment(self, *, team: str | None = None, gpus: int | None = None) -> WorkloadSpec:
        return single_pod(
            kind="Pod",
            name=self._name("exp"),
            team=self._team(team),
            priority_class="experiment",
            gpus=gpus or self.rng.choice([1, 1, 2]),
            duration=self.rng.uniform(10, 40) * 60,
            pattern=Pattern.IDLE if self.rng.random() < 0.3 else Pattern.BUSY,
        )

    def batch_job(self, *, team: str | None = None, gpus: int | None = None) -> WorkloadSpec:
        return single_pod(
            kind="Job",
            name=self._name("batch"),
            team=self._team(team),
            priority_class="batch",
            gpus=gpus or self.rng.choice([1, 2, 4]),
            duration=self.rng.uniform(15, 60) * 60,
        )

    def serving(
        self, *, team: str | None = None, replicas: int | None = None, gpus: int | None = None
    ) -> WorkloadSpec:
        return single_pod(
            kind="ReplicaSet",
            name=self._name("serve") + "-7d9f8b6c5",
            team=self._team(team),
            priority_class="online-serving",
            gpus=gpus or 1,
            replicas=replicas or self.rng.randint(1, 2),
            duration=self.rng.uniform(0.5, 2) * 3600,
            pattern=Pattern.BURSTY,
            image=SERVING_IMAGE,
        )

    def debug(self, *, team: str | None = None, gpus: int | None = None) -> WorkloadSpec:
        return single_pod(
            kind="Pod",
            name=self._name("debug"),
            team=self._team(team),
            priority_class="urgent-debug",
            gpus=gpus or self.rng.choice([1, 2, 4]),
            duration=self.rng.uniform(5, 30) * 60,
            pattern=Pattern.BURSTY,
            image=DEBUG_IMAGE,
        )
