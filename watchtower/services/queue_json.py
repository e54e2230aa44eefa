"""The queue as plain data: the stable JSON of `watchtower analyze` and the API (documented in docs/json.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from watchtower.domain.disruptions import Preemption
from watchtower.domain.estimate import StartEstimate, TierWaits
from watchtower.domain.estimate_accuracy import TierAccuracy
from watchtower.domain.forms import registry
from watchtower.domain.latency import Distribution, TierLatency
from watchtower.domain.never import NeverStart
from watchtower.domain.preemption_outcome import Outcome
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
        "range_seconds": [round(x, 3) for x in r] if (r := e.range) is not None else None,
        "accuracy": accuracy_dict(e.accuracy),
    }


def accuracy_dict(a: TierAccuracy | None) -> dict[str, Any] | None:
    if a is None:
        return None
    return {
        "checked": a.n,
        "within": a.within,
        "share_within": round(a.share_within, 4),
        "median_error": round(a.median_abs_relative, 4),
        "verdict": a.verdict,
        "text": a.words,
    }


def never_dict(n: NeverStart | None) -> dict[str, Any] | None:
    if n is None:
        return None
    return {"reason": n.reason, "asks": n.asks, "limit": n.limit, "source": n.source, "text": n.text}


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


def workload_dict(
    w: WorkloadStatus, estimate: StartEstimate | None = None, stuck: StuckHead | None = None
) -> dict[str, Any]:
    """Return a workload as the JSON shows it; `estimate` and `stuck` come from its tick, when it has one."""
    d = w.diagnosis
    out: dict[str, Any] = {
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
        "never": never_dict(w.never),
        "stuck_despite_capacity": stuck_dict(stuck),
        "preemptions_recent": w.preemptions_recent,
        "annotations": dict(w.annotations),
        "source": w.source,
        "pods_expected": w.pods_expected,
        "pods_existing": w.pods_existing,
    }
    # Each form's keys, where docs/json.md lists them: after the common ones, in the registry's order.
    for form in registry.FORMS:
        if form.workload_json is not None:
            out.update(form.workload_json(w))
    # A quota refusal stays last, as docs/json.md lists it, whatever forms the registry gains.
    out["quota"] = (
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
    )
    return out


def form_sections(state: ClusterState, now: float) -> dict[str, Any]:
    """Return the forms' sections of the queue document (Volcano Queues, DRA problems, ClusterQueues, ...),
    form after form in the registry's order, from the state at `now`."""
    out: dict[str, Any] = {}
    for form in registry.FORMS:
        if form.queue_json is not None:
            out.update(form.queue_json(state, now))
    return out


def quota_dict(q: QuotaLine) -> dict[str, Any]:
    return {
        "namespace": q.namespace,
        "name": q.name,
        "team": q.team,
        "gpus_hard": q.hard_gpus,
        "gpus_used": q.used_gpus,
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
        "outcome": outcome_dict(p.outcome) if p.outcome is not None else None,
    }


def outcome_dict(o: Outcome) -> dict[str, Any]:
    """Return what a preemption came to as the JSON shows it."""
    return {
        "verdict": o.verdict,
        "reason": o.reason or None,
        "words": o.words(),
        "at": rfc3339(o.at),
        "node": o.node or None,
        "victim_nodes": list(o.victim_nodes),
        "nominated_node": o.nominated or None,
        "taken_by": o.taken_by or None,
        "victims": o.victims,
        "gpu_hours_lost": round(o.gpu_hours_lost, 6),
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
        out.update(form_sections(state, snap.at))
    return out
