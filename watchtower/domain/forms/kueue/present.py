"""The Kueue form in the queue's JSON (docs/json.md): a workload's Kueue Workload and its two waits
(admission, then scheduling), and the document's ClusterQueues, the teams' entitlement where Kueue admits."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchtower.domain.forms.kueue.queues import KueueQueueLine, KueueSource, kueue_queue_lines
from watchtower.domain.forms.kueue.records import SOURCE_KUEUE
from watchtower.domain.queue_values import WorkloadStatus
from watchtower.domain.timefmt import rfc3339


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


def workload_json(w: WorkloadStatus) -> dict[str, Any]:
    return {
        "kueue": kueue_dict(w),
        "admission_wait_seconds": _secs(w.admission_wait),
        "scheduling_wait_seconds": _secs(w.scheduling_wait),
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


def queue_json(state: KueueSource, now: float) -> dict[str, Any]:
    return {"kueue_queues": [kueue_queue_dict(q) for q in kueue_queue_lines(state)]}


def read_from(doc: Mapping[str, Any]) -> str | None:
    """Return "Kueue Workload w in ClusterQueue q (...)" for a job Kueue holds."""
    if doc["source"] != SOURCE_KUEUE:
        return None
    k = doc["kueue"] or {}
    where = f" in ClusterQueue {k['cluster_queue']}" if k.get("cluster_queue") else ""
    return f"Kueue Workload {k.get('workload', '?')}{where} (its job is suspended: no pods until admitted)"
