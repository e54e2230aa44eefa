"""The queue as plain data: the stable JSON of `watchtower analyze` and the API (documented in docs/json.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from watchtower.domain.disruptions import Preemption
from watchtower.domain.entitlement import QueueLine, queue_lines
from watchtower.domain.estimate import StartEstimate, TierWaits
from watchtower.domain.forms.dra.messages import problem_of
from watchtower.domain.forms.dra.records import UnresolvedClaim
from watchtower.domain.forms.kueue.queues import KueueQueueLine, kueue_queue_lines
from watchtower.domain.latency import Distribution, TierLatency
from watchtower.domain.messages.types import SchedulingDiagnosis
from watchtower.domain.queue import QueueSnapshot, WorkloadStatus
from watchtower.domain.state import ClusterState
from watchtower.domain.stuck import StuckHead
from watchtower.domain.tick import QuotaLine
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.timefmt import rfc3339 as rfc3339  # re-exported: api/ imports it from here

SCHEMA_VERSION = 1


def estimate_dict(e: StartEstimate | None) -> dict[str, Any] | None:
    if e is None:
        return None
    return {
        "start_in_seconds": round(e.start_in, 3) if e.start_in is not None else None,
        "starts_at": rfc3339(e.at),
        "samples": e.samples,
        "basis": e.basis,
        "text": e.text,
    }


def stuck_dict(s: StuckHead | None) -> dict[str, Any] | None:
    if s is None:
        return None
    return {
        "pod": s.pod or None,
        "node": s.node or None,
        "node_taints": list(s.taints),
        "scheduler_name": s.scheduler,
        "scheduler_said": s.said or None,
        "likely_causes": list(s.causes),
        "cluster_queue": s.cluster_queue or None,
        "quota_free_gpus": s.quota_free if s.cluster_queue else None,
        "why": s.why,
    }


def _dra_problem(d: SchedulingDiagnosis | None) -> str | None:
    p = problem_of(tuple(r.reason for r in d.reasons)) if d is not None else None
    return p.value if p is not None else None


def kueue_dict(w: WorkloadStatus) -> dict[str, Any] | None:
    k = w.kueue
    if k is None:
        return None
    return {
        "workload": k.workload,
        "local_queue": k.local_queue or None,
        "cluster_queue": k.cluster_queue or None,
        "admitted": k.admitted,
        "admitted_at": rfc3339(k.admitted_at),
        "reason": k.reason or None,
        "message": k.message or None,
        "position": k.position,
        "evictions": k.evictions,
    }


def _secs(v: float | None) -> float | None:
    return round(v, 3) if v is not None else None


def workload_dict(
    w: WorkloadStatus, estimate: StartEstimate | None = None, stuck: StuckHead | None = None
) -> dict[str, Any]:
    """Return a workload as the JSON shows it; `estimate` and `stuck` come from its tick, when it has one."""
    d = w.diagnosis
    return {
        "namespace": w.namespace,
        "name": w.name,
        "kind": w.kind,
        "team": w.team,
        "tier": w.tier,
        "priority": w.priority,
        "priority_class": w.priority_class,
        "state": w.state.value,
        "since": rfc3339(w.since),
        "wait_seconds": round(w.wait_seconds, 3),
        "warn_after_seconds": w.warn_after,
        "critical_after_seconds": w.critical_after,
        "severity": w.severity or None,
        "gpus_requested": w.gpus_requested,
        "gpus_held": w.gpus_held,
        "gpus_per_pod": w.gpus_per_pod,
        "pods_pending": w.pods_pending,
        "pods_running": w.pods_running,
        "pods_gated": w.pods_gated,
        "gang": w.gang,
        "scheduling_reason": w.scheduling_reason or None,
        "reasons": [{"reason": r.reason, "nodes": r.nodes, "text": r.text} for r in (d.reasons if d else ())],
        "nodes_total": d.total_nodes if d else None,
        "message": d.raw if d else None,
        "message_truncated": d.truncated if d else False,
        "preemption": w.preemption.value,
        "preemption_node": (d.preemption_node or None) if d else None,
        "preemption_victims": d.victims if d else None,
        "gang_min": d.gang_min if d else None,
        "gang_placed": d.gang_placed if d else None,
        "why": w.why,
        "nominated_node": w.nominated_node or None,
        "oldest_pending_pod": w.oldest_pod or None,
        "ahead": w.ahead,
        "ahead_higher_tier": w.ahead_higher_tier,
        "position_in_tier": estimate.position if estimate is not None else None,
        "position_queue": w.facts.position_queue,
        "start_estimate": estimate_dict(estimate),
        "stuck_despite_capacity": stuck_dict(stuck),
        "preemptions_recent": w.preemptions_recent,
        "annotations": dict(w.annotations),
        "source": w.source,
        "pods_expected": w.pods_expected,
        "pods_existing": w.pods_existing,
        "pod_group": w.group or None,
        "volcano_queue": w.queue or None,
        "gpu_claims": [
            {
                "name": c.name,
                "device_class": c.device_class,
                "count": c.count,
                "allocated": c.allocated,
                "devices": list(c.devices),
            }
            for c in w.facts.gpu_claims
        ],
        "dra_problem": _dra_problem(d),
        "kueue": kueue_dict(w),
        "admission_wait_seconds": _secs(w.admission_wait),
        "scheduling_wait_seconds": _secs(w.scheduling_wait),
        "quota": (
            {
                "name": w.quota.quota,
                "requested": w.quota.requested,
                "used": w.quota.used,
                "limited": w.quota.limited,
                "refusals": w.quota.count,
                "last_refused": rfc3339(w.quota.last),
            }
            if w.quota
            else None
        ),
    }


def quota_dict(q: QuotaLine) -> dict[str, Any]:
    return {
        "namespace": q.namespace,
        "name": q.name,
        "team": q.team,
        "gpus_hard": q.hard_gpus,
        "gpus_used": q.used_gpus,
    }


def dra_problem_dict(u: UnresolvedClaim, now: float) -> dict[str, Any]:
    return {
        "namespace": u.namespace,
        "pod": u.pod,
        "owner_kind": u.owner_kind or None,
        "owner_name": u.owner_name or None,
        "reason": u.reason,
        "why": u.why,
        "pending_seconds": round(max(0.0, now - u.created), 3),
    }


def volcano_queue_dict(q: QueueLine) -> dict[str, Any]:
    return {
        "name": q.name,
        "weight": q.weight,
        "state": q.state or None,
        "gpus_capability": q.capability_gpus,
        "gpus_deserved": q.deserved_gpus,
        "gpus_guarantee": q.guarantee_gpus,
        "gpus_allocated": q.allocated_gpus,
        "namespaces": list(q.namespaces),
        "teams": list(q.teams),
    }


def kueue_queue_dict(q: KueueQueueLine) -> dict[str, Any]:
    return {
        "name": q.name,
        "cohort": q.cohort or None,
        "gpus_nominal": q.nominal_gpus,
        "gpus_borrowing_limit": q.borrowing_limit_gpus,
        "gpus_lending_limit": q.lending_limit_gpus,
        "gpus_reserved": q.reserved_gpus,
        "gpus_used": q.used_gpus,
        "gpus_borrowed": q.borrowed_gpus,
        "pending_workloads": q.pending,
        "admitted_workloads": q.admitted,
        "stopped": q.stopped,
        "local_queues": [{"namespace": ns, "name": name} for ns, name in q.local_queues],
        "namespaces": list(q.namespaces),
        "teams": list(q.teams),
    }


def preemption_dict(p: Preemption, tiers: TierPolicy) -> dict[str, Any]:
    """Return a preemption as the JSON shows it: the preemptor as the record holds it (the cluster state
    records its identity and tier when first named, so it outlives the preemptor pod)."""
    lost = p.gpu_hours_lost
    return {
        "victim_uid": p.victim_uid,
        "victim_namespace": p.victim_namespace,
        "victim_name": p.victim_name,
        "victim_workload": (
            {"kind": p.victim_workload.kind, "name": p.victim_workload.name} if p.victim_workload else None
        ),
        "victim_tier": p.victim_tier(tiers),
        "victim_priority": p.victim_priority,
        "preemptor_uid": p.preemptor_uid or None,
        "preemptor_kind": p.preemptor_kind or "Pod",
        "preemptor_namespace": p.preemptor_namespace or None,
        "preemptor_name": p.preemptor_name or None,
        "preemptor_tier": p.preemptor_tier(tiers),
        "node": p.node or None,
        "at": rfc3339(p.at),
        "gpus": p.victim_gpus,
        "ran_seconds": round(p.at - p.victim_started, 3)
        if p.at is not None and p.victim_started is not None
        else None,
        "gpu_hours_lost": round(lost, 6) if lost is not None else None,
        "reason": p.reason,
        "kueue_reason": p.kueue_reason or None,
    }


def _dist(d: Distribution) -> dict[str, Any]:
    return {"count": d.count, "p50": d.p50, "p95": d.p95, "max": d.max, "censored": d.censored}


def latency_dicts(rows: list[TierLatency]) -> list[dict[str, Any]]:
    return [
        {
            "tier": r.tier,
            "time_to_schedule_seconds": _dist(r.time_to_schedule),
            "startup_seconds": _dist(r.startup),
        }
        for r in rows
    ]


def snapshot_dict(
    snap: QueueSnapshot,
    tiers: TierPolicy,
    state: ClusterState | None = None,
    *,
    waits: TierWaits | None = None,
    stuck: Sequence[StuckHead] = (),
) -> dict[str, Any]:
    """Return the snapshot as the stable JSON document (schema_version 1)."""
    cap = snap.capacity
    heads = {s.status.key: s for s in stuck}
    order = sorted(
        snap.workloads,
        key=lambda w: (tiers.rank(w.tier), not w.waiting, -w.wait_seconds, w.namespace, w.name),
    )
    out: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "at": rfc3339(snap.at),
        "workloads": [
            workload_dict(w, waits.estimate(w) if waits is not None else None, heads.get(w.key))
            for w in order
        ],
        "preemptions": [preemption_dict(p, tiers) for p in snap.preemptions],
        "disruptions": [
            {
                "uid": d.uid,
                "namespace": d.namespace,
                "name": d.name,
                "reason": d.reason,
                "at": rfc3339(d.at),
                "node": d.node or None,
                "gpus": d.gpus,
            }
            for d in snap.disruptions
        ],
        "fragmentation": [
            {
                "namespace": f.key.namespace,
                "name": f.key.name,
                "kind": f.key.kind,
                "gpus_requested": f.gpus_requested,
                "free_gpus_total": f.free_gpus_total,
                "largest_free_on_one_node": f.largest_free_on_one_node,
            }
            for f in snap.fragmentation
        ],
        "partial_gangs": [
            {
                "namespace": w.namespace,
                "name": w.name,
                "kind": w.kind,
                "gpus_held": w.gpus_held,
                "pods_running": w.pods_running,
                "pods_pending": w.pods_pending,
                "wait_seconds": round(w.wait_seconds, 3),
            }
            for w in order
            if w.state.value == "partial" and w.gang
        ],
        "capacity": {
            "gpus_allocatable": cap.allocatable,
            "gpus_used": cap.used,
            "gpus_free": cap.free_total,
            "largest_free_on_one_node": cap.largest_free,
            "gpus_dra": cap.dra,
            "nodes": [
                {
                    "name": n.name,
                    "allocatable": n.allocatable,
                    "used": n.used,
                    "free": n.free,
                    "schedulable": n.schedulable,
                    "dra": n.dra,
                }
                for n in cap.nodes
            ],
        },
        "gated_pods": snap.gated_pods,
    }
    if state is not None:
        out["quota"] = [
            {
                "namespace": q.namespace,
                "name": q.name,
                "team": state.team_of(q.namespace),
                "gpus_hard": q.hard_gpus,
                "gpus_used": q.used_gpus,
            }
            for q in sorted(state.control.quotas.values(), key=lambda q: (q.namespace, q.name))
            if q.hard_gpus is not None
        ]
        out["volcano_queues"] = [volcano_queue_dict(q) for q in queue_lines(state)]
        out["dra_problems"] = [dra_problem_dict(u, snap.at) for u in state.unresolved_claims()]
        out["kueue_queues"] = [kueue_queue_dict(q) for q in kueue_queue_lines(state)]
    return out
