"""The demo's scripted moments: submissions at fixed simulated times after the start, on top of the random mix.

Each sets up a situation and leaves the outcome to the scheduler, quota admission and the controllers, so that
within the first two simulated hours (two real minutes at 60x) every feature of the service has something to
show. The README's Demo section tells the same timeline in real seconds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from watchtower.simulator.workloads import (
    WorkloadGenerator,
    WorkloadSpec,
    dra_job,
    jobset,
    paddle_job,
    single_pod,
    team_namespace,
)

MINUTE = 60.0
SWEEP_AT = 1 * MINUTE
GANG_AT = 2 * MINUTE
GANG_NAME = "allreduce-gang"
GANG_SIZE = 4
VOLCANO_AT = 3 * MINUTE
VOLCANO_JOB = "ocr-train"
VOLCANO_QUEUE = "research"  # a Volcano Queue the research teams share (warm.py's prelude makes it)
VOLCANO_WORKERS = 4
JOBSET_AT = 4 * MINUTE
JOBSET_NAME = "eval-suite"
TRAINJOB_NAME = "llama-ft"
# GPUs through DRA: the warm start fills the DRA nodes with DRA_HOLDER until DRA_FREED; DRA_JOB, submitted
# at DRA_AT, waits in the DynamicResources plugin's words past its tier's 30-minute warning, then is allocated.
DRA_AT = 6 * MINUTE
DRA_JOB = "vit-finetune"
DRA_HOLDER = "dra-pretrain"
DRA_FREED = 45 * MINUTE
# Kueue (its ClusterQueue holds one of these jobs at a time): A is admitted, B waits suspended with no pods
# at the queue's quota, the urgent one preempts A within the ClusterQueue, then B is admitted.
KUEUE_AT = 6 * MINUTE
# (name, WorkloadPriorityClass, its pods' PriorityClass, minutes after KUEUE_AT, minutes it runs)
KUEUE_JOBS = (
    ("kueue-train-a", "kueue-low", "online-serving", 0.0, 40),
    ("kueue-train-b", "kueue-low", "online-serving", 1.0, 30),
)
KUEUE_URGENT = ("kueue-urgent", "kueue-high", "urgent-debug", 12.0, 15)
# Gated work (the gated form): a Kueue plain-pod group behind the Kueue jobs, its pods gated until Kueue
# admits its Workload; and bare pods in the Volcano queue behind its PaddleJob, gated until the queue has room.
KUEUE_POD_GROUP_AT = KUEUE_AT + 2 * MINUTE
KUEUE_POD_GROUP = "kueue-pods"
VOLCANO_GATED_AT = VOLCANO_AT + 1 * MINUTE
VOLCANO_GATED = "vision-pods"
# Work that can never start as configured: one pod asking twice the GPUs of the largest node. It waits with
# "can never start as configured" from its first tick, has no start estimate, and WorkloadCanNeverStart fires.
NEVER_AT = 2.5 * MINUTE
NEVER_JOB = "giant-pretrain"
CRITICAL_AT = (15, 30, 45, 60, 75, 90, 105)  # minutes after the start: an incident being debugged
SERVING_AT = (10, 35, 60, 85)
EXPERIMENT_AT = (5, 30, 50, 75, 100)

KUEUE_LOCAL_QUEUE = (
    "research"  # the LocalQueue in the production namespace (simulator/forms/kueue/controller.py LOCAL_QUEUE)
)
PRODUCTION_TEAM = "platform"  # its namespace has no GPU quota (warm.py's prelude creates it)
Room = Callable[[str], int]  # namespace → GPUs its quota still admits


@dataclass(frozen=True, slots=True)
class Moment:
    at: float  # simulated seconds after the start
    what: str  # what it is meant to show
    make: Callable[[Room], WorkloadSpec]  # called when it comes: the submitter picks a team with room


def moments(gen: WorkloadGenerator, teams: list[str], gpus_per_node: int, dra_nodes: int = 0) -> list[Moment]:
    """Return the scripted submissions, in time order; their sizes and durations come from `gen` (the seed).

    `teams[0]` is the team the warm start left at its quota; the others submit these, whichever has room."""
    g = gpus_per_node
    half = max(1, g // 2)
    others = teams[1:] or teams

    def roomiest(room: Room) -> str:
        # People whose namespace is full ask a colleague with room, or wait: the story needs the former.
        return max(others, key=lambda t: room(team_namespace(t)))

    def sweep(room: Room) -> WorkloadSpec:
        # More than is free, ahead of the low tier but never preempting: it waits for GPUs to come free and
        # crosses its tier's 30-minute warning.
        return single_pod(
            kind="Job",
            name="sweep-lr",
            team=roomiest(room),
            priority_class="sweep",
            gpus=half,
            replicas=5,
            duration=20 * MINUTE,
        )

    def gang(room: Room) -> WorkloadSpec:
        # A gang its team's quota admits all but one pod of: the Job controller makes three, the fourth is
        # refused, and the scheduler holds the three with no condition and no event (PreEnqueue) until
        # the quota frees room for the fourth. Sized from the room each team has when it comes.
        def per_pod(team: str) -> int:
            r = room(team_namespace(team))
            p = min(g, r // (GANG_SIZE - 1))
            return p if p > 0 and GANG_SIZE * p > r else 0

        fitting = [t for t in others if per_pod(t)]
        team = max(fitting, key=per_pod) if fitting else roomiest(room)
        return single_pod(
            kind="Job",
            name=GANG_NAME,
            team=team,
            priority_class="experiment",
            gpus=per_pod(team) or half,
            replicas=GANG_SIZE,
            duration=20 * MINUTE,
            pod_group=True,
        )

    def volcano(room: Room) -> WorkloadSpec:
        # Its PodGroup waits Pending (no pods yet) until the cluster's idle GPUs let it into its queue, then
        # Inqueue while its pods do not all fit, then Running: each in Volcano's own words.
        return paddle_job(
            name=VOLCANO_JOB,
            team=PRODUCTION_TEAM,
            priority_class="experiment",
            workers=VOLCANO_WORKERS,
            gpus_per_worker=half,
            duration=20 * MINUTE,
            volcano_queue=VOLCANO_QUEUE,
        )

    def eval_suite(room: Room) -> WorkloadSpec:
        # 2 replicated Jobs x 2 pods, the lowest tier: it waits as one JobSet, not as two Jobs.
        quarter = max(1, g // 4)
        return jobset(
            name=JOBSET_NAME,
            team=PRODUCTION_TEAM,
            priority_class="batch",
            replicated_jobs={"driver": 1, "workers": 1},
            pods_per_job=2,
            gpus=quarter,
            duration=20 * MINUTE,
        )

    def train_job(room: Room) -> WorkloadSpec:
        # The JobSet a TrainJob made: the page names the TrainJob, the one thing its owner submitted.
        return jobset(
            name=TRAINJOB_NAME,
            team=PRODUCTION_TEAM,
            priority_class="long-training",
            replicated_jobs={"node": 2},
            pods_per_job=2,
            gpus=half,
            duration=30 * MINUTE,
            train_job=True,
        )

    def dra(room: Room) -> WorkloadSpec:
        return dra_job(
            name=DRA_JOB,
            team=PRODUCTION_TEAM,
            priority_class="experiment",
            gpus=g,
            replicas=dra_nodes,
            duration=20 * MINUTE,
        )

    def kueue_job(name: str, wpc: str, pclass: str, minutes: int) -> Callable[[Room], WorkloadSpec]:
        def make(room: Room) -> WorkloadSpec:
            spec = single_pod(
                kind="Job",
                name=name,
                team=PRODUCTION_TEAM,
                priority_class=pclass,
                gpus=max(1, g // 4),
                replicas=2,
                duration=minutes * MINUTE,
            )
            return replace(spec, kueue_queue=KUEUE_LOCAL_QUEUE, kueue_class=wpc)

        return make

    def kueue_pod_group(room: Room) -> WorkloadSpec:
        # Bare pods, one plain-pod group (its templates named `<group>-<i>`, as the pods are).
        spec = single_pod(
            kind="Job",
            name=KUEUE_POD_GROUP,
            team=PRODUCTION_TEAM,
            priority_class="online-serving",
            gpus=max(1, g // 4),
            replicas=2,
            duration=20 * MINUTE,
        )
        return replace(spec, kind="Pod", kueue_queue=KUEUE_LOCAL_QUEUE, kueue_class="kueue-low")

    def volcano_gated(room: Room) -> WorkloadSpec:
        # As large as the PaddleJob ahead of it: never let into the queue before it, only after it.
        spec = single_pod(
            kind="Job",
            name=VOLCANO_GATED,
            team=PRODUCTION_TEAM,
            priority_class="experiment",
            gpus=half,
            replicas=VOLCANO_WORKERS,
            duration=20 * MINUTE,
        )
        return replace(spec, kind="Pod", volcano_queue=VOLCANO_QUEUE)

    def never(room: Room) -> WorkloadSpec:
        # In the namespace with no GPU quota: the nodes, not a quota, are what it can never fit.
        return single_pod(
            kind="Job",
            name=NEVER_JOB,
            team=PRODUCTION_TEAM,
            priority_class="experiment",
            gpus=2 * g,
            duration=20 * MINUTE,
        )

    out = [
        Moment(SWEEP_AT, "a medium sweep larger than free capacity, not allowed to preempt", sweep),
        Moment(
            GANG_AT, "a 1.36 gang with one pod refused by quota: held with no word from the scheduler", gang
        ),
        Moment(NEVER_AT, "a pod asking twice the GPUs of any node: can never start as configured", never),
        Moment(VOLCANO_AT, "a PaddleJob Volcano gang-schedules: Pending, Inqueue, Running", volcano),
        Moment(
            VOLCANO_GATED_AT,
            "bare pods Volcano gates until its queue has room: held by the queue",
            volcano_gated,
        ),
        Moment(JOBSET_AT, "a JobSet of 2 Jobs x 2 pods, waiting as one workload", eval_suite),
        Moment(JOBSET_AT, "a TrainJob's JobSet, waiting as the TrainJob", train_job),
        *(
            Moment(
                KUEUE_AT + after * MINUTE,
                "a Kueue-queued Job: admitted, or suspended at its quota",
                kueue_job(n, c, pc, d),
            )
            for n, c, pc, after, d in (*KUEUE_JOBS, KUEUE_URGENT)
        ),
        Moment(
            KUEUE_POD_GROUP_AT,
            "a Kueue plain-pod group, its pods gated until Kueue admits it: held by Kueue",
            kueue_pod_group,
        ),
    ]
    if dra_nodes:
        out.append(Moment(DRA_AT, "a Job asking GPUs through DRA claims: cannot allocate all claims", dra))
    # On a full cluster these preempt: the victims the scheduler picks are low-tier training or batch.
    prod = PRODUCTION_TEAM
    out += [
        Moment(m * MINUTE, "a critical debug job preempting", lambda r: gen.debug(team=prod, gpus=g))
        for m in CRITICAL_AT
    ]
    out += [
        Moment(
            m * MINUTE, "serving replicas preempting", lambda r: gen.serving(team=prod, replicas=2, gpus=half)
        )
        for m in SERVING_AT
    ]
    out += [
        Moment(m * MINUTE, "an experiment preempting", lambda r: gen.experiment(team=roomiest(r), gpus=half))
        for m in EXPERIMENT_AT
    ]
    return sorted(out, key=lambda m: m.at)
