"""The gangs form in the queue's JSON (docs/json.md): a workload's PodGroup and Volcano queue, and the
document's Volcano Queues, the teams' entitlement where Volcano schedules."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchtower.domain.entitlement import EntitlementSource, QueueLine, queue_lines
from watchtower.domain.forms.gangs.records import SOURCE_PODGROUP, SOURCE_VOLCANO
from watchtower.domain.queue_values import WorkloadStatus


def workload_json(w: WorkloadStatus) -> dict[str, Any]:
    return {"pod_group": w.group or None, "volcano_queue": w.queue or None}


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


def queue_json(state: EntitlementSource, now: float) -> dict[str, Any]:
    return {"volcano_queues": [volcano_queue_dict(q) for q in queue_lines(state)]}


def read_from(doc: Mapping[str, Any]) -> str | None:
    """Return "PodGroup trainer-0" or "Volcano PodGroup ocr-train in queue vision-q" for a gang's wait."""
    source, group, queue = doc["source"], doc["pod_group"] or "", doc["volcano_queue"] or ""
    if source == SOURCE_PODGROUP:
        return f"PodGroup {group}" if group else "its PodGroup"
    if source == SOURCE_VOLCANO:
        head = f"Volcano PodGroup {group}" if group else "its Volcano PodGroup"
        return f"{head} in queue {queue}" if queue else head
    return None
