"""The Kueue form's JSON, key by key (domain/forms/shapes.py): what present.py returns, as /openapi.json
documents it."""

from __future__ import annotations

from typing import TypedDict

from watchtower.domain.forms.shapes import Number, Time


class KueueWorkload(TypedDict):
    """Its Kueue Workload (`kueue.x-k8s.io`): where Kueue queues it and whether Kueue admitted it."""

    workload: str
    """the Kueue Workload's name (its job's pods and it are one workload)"""
    local_queue: str | None
    """`spec.queueName`"""
    cluster_queue: str | None
    """the ClusterQueue it is admitted to, else the one its LocalQueue leads to"""
    admitted: bool
    """`QuotaReserved=True`: Kueue reserved its quota and unsuspended its job"""
    admitted_at: Time | None
    """when (`QuotaReserved` `lastTransitionTime`); null while not admitted"""
    reason: str | None
    """the `QuotaReserved` reason: `Pending`, `Inadmissible`, `AdmissionGated`, `Waiting`, `QuotaReserved`"""
    message: str | None
    """Kueue's words (`couldn't assign flavors to pod set main: insufficient unused quota ...`)"""
    position: int | None
    """0-based place in its ClusterQueue from the visibility API; null when the API is not reachable or
    it is admitted"""
    evictions: int
    """`status.schedulingStats.evictions` counts, summed (preemptions among them)"""


class KueueWorkloadKeys(TypedDict):
    """A workload's keys of the Kueue form."""

    kueue: KueueWorkload | None
    """its Kueue Workload; null when Kueue does not queue it"""
    admission_wait_seconds: Number | None
    """Kueue: from the Workload's creation (or last requeue) to admission, or to `at` while not admitted;
    null when Kueue does not queue it"""
    scheduling_wait_seconds: Number | None
    """Kueue: after admission, its pods' wait (`wait_seconds` − `admission_wait_seconds`); null when not
    Kueue, not admitted yet or not waiting"""


class KueueLocalQueue(TypedDict):
    """A LocalQueue leading into a ClusterQueue."""

    namespace: str
    """its namespace"""
    name: str
    """the LocalQueue"""


class KueueQueue(TypedDict):
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


class KueueSections(TypedDict):
    """The queue document's sections of the Kueue form."""

    kueue_queues: list[KueueQueue]
    """every Kueue ClusterQueue, whatever the filters: the teams' entitlement where Kueue admits"""
