"""A Kueue preemption as a preemption record: the victim Workload, its preemptor Workload, the GPU-hours lost.

Kueue evicts the victim Workload (`Evicted` reason `Preempted`, `Preempted` True with the reason and
the preemptor's uid in the message: pkg/scheduler/preemption/preemption.go IssuePreemptions); its job is
suspended and the job's controller deletes the pods with no DisruptionTarget of the scheduler's, so the
Workload's condition is the only record. It is a preemption (thrash, tiers), never another disruption.
"""

from __future__ import annotations

from dataclasses import replace

from watchtower.domain.disruptions import Preemption
from watchtower.domain.forms.kueue.records import KUEUE_WORKLOAD_KIND, KueueWorkload
from watchtower.domain.workloads import WorkloadKey


def record_key(w: KueueWorkload) -> str:
    """Return the preemption table's key of a Kueue preemption: one Workload may be preempted, readmitted
    and preempted again, each a preemption of its own (a pod is preempted once)."""
    at = w.preempted.at if w.preempted is not None else None
    return f"kueue/{w.uid or w.namespace + '/' + w.name}/{at}"


def kueue_preemption(
    w: KueueWorkload,
    old: KueueWorkload | None,
    key: WorkloadKey,
    priority: int | None,
    priority_class: str,
    *,
    pods_known: bool,
    pods_started: float | None,
) -> Preemption | None:
    """Return the preemption a Workload's `Preempted=True` condition records, unattributed; None if none.

    The GPUs and start are the admitted run's: the old object still has them when the eviction came with
    the quota released in one update. `pods_started` is when its first pod started, as its pods show
    (`pods_known`); known pods that never started ran nothing: no GPU-hours lost. With no pod known: its
    PodsReady (which Kueue writes only with waitForPodsReady), else its admission."""
    p = w.preempted
    if p is None:
        return None
    ran = old if old is not None and old.reserved else w
    started: float | None
    if ran.pods_ready_at is not None:
        started = ran.pods_ready_at
    elif pods_known:
        started = pods_started
    else:
        started = ran.quota_changed
    return Preemption(
        victim_uid=w.uid,
        victim_namespace=w.namespace,
        victim_name=w.name,
        at=p.at,
        victim_workload=key,
        victim_priority=priority,
        victim_priority_class=priority_class,
        victim_gpus=ran.gpus_asked,
        victim_started=started,
        preemptor_uid=p.preemptor_uid,
        reason="Preempted",
        preemptor_kind=KUEUE_WORKLOAD_KIND,
        kueue_reason=p.reason,
    )


def attributed(p: Preemption, preemptor: KueueWorkload, priority: int | None, pclass: str) -> Preemption:
    """Return the record with its preemptor Workload's identity and priority."""
    return replace(
        p,
        preemptor_namespace=preemptor.namespace,
        preemptor_name=preemptor.name,
        preemptor_priority=priority,
        preemptor_priority_class=pclass,
    )
