"""One evaluation of the cluster as one immutable value, handed in turn to every consumer.

The tick loop (`watchtower.runtime.tick_loop`) builds a `Tick` from the queue tracker, lets GPU usage add its
findings (`with_gpu`), then hands the same value to alerting and to the API's documents: nobody reaches back
into the live state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from watchtower.domain.forms.dra.records import UnresolvedClaim
from watchtower.domain.forms.kueue.queues import KueueQueueLine

from .alerts.rules.base import GpuHolder, HolderChanges
from .entitlement import QueueLine
from .estimate import TierWaits
from .gpu_usage import GpuAlert
from .health import HEALTHY, SourceHealth
from .queue import QueueSnapshot, WorkloadFacts, WorkloadStatus
from .queue_order import QueueChange
from .stuck import StuckHead


@dataclass(frozen=True, slots=True)
class QuotaLine:
    """A namespace's GPU quota as shown to people: `requests.nvidia.com/gpu` of its status."""

    namespace: str
    name: str
    team: str
    hard_gpus: int
    used_gpus: int | None


@dataclass(frozen=True, slots=True)
class Tick:
    at: float  # cluster time of the evaluation (the simulator's runs faster than the wall clock)
    snapshot: QueueSnapshot
    health: SourceHealth = HEALTHY
    # GPUs each workload's bound pods hold, per node: while urgent work is stuck, those ranked below it.
    holders: tuple[GpuHolder, ...] = ()
    # How `holders` differ from the tracker's previous holders (the priority-inversion rule's index applies
    # it); None when not known. How the Tick was made, not what it says.
    holder_changes: HolderChanges | None = field(default=None, compare=False)
    # Running workloads are not evaluated each tick (they are most of a big cluster); those a consumer
    # named beforehand (GPU usage's idle holders) are, and travel here, apart from the queue.
    holder_statuses: tuple[WorkloadStatus, ...] = ()
    quota: tuple[QuotaLine, ...] = ()
    running_by_tier: Mapping[str, int] = field(default_factory=dict)
    gpu_alerts: tuple[GpuAlert, ...] = ()  # GPU usage's findings, added by `with_gpu`
    # Each tier's recent time to schedule, from which every waiting workload's start estimate is read.
    waits: TierWaits | None = None
    stuck: tuple[StuckHead, ...] = ()  # tier heads that fit yet have waited past `queue.stuck_after`
    volcano_queues: tuple[QueueLine, ...] = ()  # Volcano Queues: the teams' entitlement where Volcano runs
    # Pods naming a DRA claim, template or class that is not there: no workload (GPUs unknown), listed apart.
    dra_problems: tuple[UnresolvedClaim, ...] = ()
    kueue_queues: tuple[KueueQueueLine, ...] = ()  # Kueue ClusterQueues, likewise where Kueue admits
    # The forms' sections of the queue document as plain JSON data, by key in the registry's order (each
    # form's `queue_json`): presented from the state at the tick, which the API's documents never read.
    form_sections: Mapping[str, Any] = field(default_factory=dict)
    # The snapshot's workloads' facts in order, as one list the evaluation reuses, the same object, while
    # no workload's facts changed: a consumer that keeps it tells an unchanged queue by identity (the
    # fairness history records by difference). Empty when the builder did not give it.
    listed_facts: Sequence[WorkloadFacts] = ()
    # How `listed_facts` was made from the list before it (the facts taken out and put in), when it was
    # one change of that list: a consumer that kept the list before applies this and walks nothing else.
    # How the Tick was made, not what it says: two Ticks of the same queue are equal whatever their history.
    facts_change: QueueChange | None = field(default=None, compare=False)

    def with_gpu(self, alerts: tuple[GpuAlert, ...]) -> Tick:
        return dataclasses.replace(self, gpu_alerts=alerts)

    def snapshot_with_holders(self) -> QueueSnapshot:
        """Return the queue snapshot with the named holders' statuses added (those not in it already)."""
        if not self.holder_statuses:
            return self.snapshot
        have = {(w.namespace, w.name) for w in self.snapshot.workloads}
        extra = tuple(w for w in self.holder_statuses if (w.namespace, w.name) not in have)
        return dataclasses.replace(self.snapshot, workloads=(*self.snapshot.workloads, *extra))
