"""The queue pages and one workload's detail."""

from __future__ import annotations

from .common import Body, Time
from .preemption import Preemption
from .workload import Workload


class VolcanoQueue(Body):
    """A Volcano Queue (`scheduling.volcano.sh/v1beta1`): a team's entitlement where Volcano schedules, in GPUs
    (`nvidia.com/gpu`; volcano-sh/apis pkg/apis/scheduling/v1beta1/types.go QueueSpec, QueueStatus)."""

    name: str
    """the Queue (cluster-scoped)"""
    weight: int
    """`spec.weight`: its share against the other queues when GPUs are divided"""
    state: str | None
    """`status.state`: `Open`, `Closed`, `Closing`, `Unknown`"""
    gpus_capability: int | None
    """`spec.capability`: the most it may ever use (null: no limit set)"""
    gpus_deserved: int | None
    """`spec.deserved`: its fair share; above it, its GPUs may be reclaimed by other queues"""
    gpus_guarantee: int | None
    """`spec.guarantee.resource`: reserved for it, never lent"""
    gpus_allocated: int | None
    """`status.allocated`: what its running work holds now"""
    namespaces: list[str]
    """the namespaces whose Volcano PodGroups or PaddleJobs (`spec.schedulingPolicy.queue`) name it"""
    teams: list[str]
    """those namespaces' teams"""


class KueueLocalQueue(Body):
    """A LocalQueue leading into a ClusterQueue."""

    namespace: str
    """its namespace"""
    name: str
    """the LocalQueue"""


class KueueQueue(Body):
    """A Kueue ClusterQueue (`kueue.x-k8s.io`): its GPUs (`nvidia.com/gpu` over its flavors) and who uses it."""

    name: str
    """the ClusterQueue (cluster-scoped)"""
    cohort: str | None
    """the cohort it lends and borrows in"""
    gpus_nominal: int | None
    """the flavors' `nominalQuota`, summed (null: no GPU quota)"""
    gpus_borrowing_limit: int | None
    """`borrowingLimit`, summed; null: unlimited (or no GPU quota)"""
    gpus_lending_limit: int | None
    """`lendingLimit`, summed; null: unlimited (or no GPU quota)"""
    gpus_reserved: int
    """`status.flavorsReservation`: quota its reserving workloads hold"""
    gpus_used: int
    """`status.flavorsUsage`: held by its admitted workloads"""
    gpus_borrowed: int
    """of the usage, borrowed from the cohort"""
    pending_workloads: int
    """`status.pendingWorkloads`"""
    admitted_workloads: int
    """`status.admittedWorkloads`"""
    stopped: bool
    """`spec.stopPolicy` is `Hold` or `HoldAndDrain`"""
    local_queues: list[KueueLocalQueue]
    """the LocalQueues leading into it"""
    namespaces: list[str]
    """their namespaces"""
    teams: list[str]
    """those namespaces' teams"""


class Queue(Body):
    """`/api/v1/queue`: one page of the tracked workloads in display order (tier, waiting first, longest wait).

    Served as bytes prebuilt per evaluation (api/documents.py), never validated per request: this model
    describes the body for /openapi.json, and the tests check the bytes against it."""

    schema_version: int
    """`1`, as in `watchtower analyze`"""
    at: Time | None
    """the evaluation time"""
    total: int
    """workloads matching the filters"""
    offset: int
    """the first of them on this page"""
    count: int
    """workloads on this page (`offset`, `limit`)"""
    workloads: list[Workload]
    """the page"""
    volcano_queues: list[VolcanoQueue]
    """every Volcano Queue, whatever the filters: the teams' entitlement where Volcano schedules"""
    kueue_queues: list[KueueQueue]
    """every Kueue ClusterQueue, whatever the filters: the teams' entitlement where Kueue admits"""


class WorkloadDetail(Body):
    """`/api/v1/workloads/{namespace}/{name}`: one workload, running or waiting, and its pods' preemptions."""

    workload: Workload
    """the workload, running or waiting"""
    preemptions: list[Preemption]
    """the preemptions its pods suffered in `queue.preemption_window`, newest first"""
