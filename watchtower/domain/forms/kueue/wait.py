"""Why a Kueue-queued job waits: for admission (suspended, no pods), or, once admitted, for its pods.

Waiting runs from the Workload's creation (or its last requeue) to `QuotaReserved=True`; after that
the pods' own scheduling wait follows and the whole wait is the two summed, so the wait keeps its start.
"""

from __future__ import annotations

from dataclasses import dataclass

from watchtower.domain.forms.gangs.records import SOURCE_PODS
from watchtower.domain.forms.kueue.records import (
    SOURCE_KUEUE,
    KueueFacts,
    KueueWorkload,
    kueue_why,
    waiting_since,
)
from watchtower.domain.forms.kueue.tables import KueueTables


@dataclass(frozen=True, slots=True)
class KueueWait:
    facts: KueueFacts
    state: str | None = None  # a WorkloadState value to impose, None: the pods' own
    since: float | None = None  # the wait's start, None: the pods'
    why: str = ""  # set: Kueue's words replace the pods'
    source: str = SOURCE_KUEUE
    reason: str = ""


def kueue_wait(tables: KueueTables, w: KueueWorkload, *, queued: bool, bound: int) -> KueueWait:
    """Return what a job's Kueue Workload says of its wait, given whether pods of it queue or are bound."""
    cq = tables.cluster_queue_of(w)
    start = waiting_since(w, w.quota_changed)
    facts = KueueFacts(
        workload=w.name,
        local_queue=w.local_queue,
        cluster_queue=cq,
        admitted=w.reserved,
        admitted_at=w.quota_changed if w.reserved else None,
        reason=w.reason,
        message=w.message,
        position=tables.positions.get((w.namespace, w.name)) if not w.reserved else None,
        evictions=w.evictions,
        created=w.created,
        waiting_since=start,
    )
    if w.waiting:
        # Suspended by Kueue: pods still there are the evicted run's, on their way out.
        state = "partial" if bound else "pending"
        return KueueWait(facts, state, start, kueue_why(w, cq), SOURCE_KUEUE, w.reason or "Pending")
    if not w.reserved:  # deactivated (spec.active false): not queued, nothing to wait for
        return KueueWait(facts)
    if queued:
        return KueueWait(facts, since=start)
    if not bound:
        why = f"admitted by Kueue to ClusterQueue {cq or '?'}: waiting for its job to create its pods"
        return KueueWait(facts, "pending", start, why, SOURCE_PODS, "")
    return KueueWait(facts)
