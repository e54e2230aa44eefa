"""Where a wait was read from and what a gang lacks, in the words of the objects users know; a Volcano
Queue's entitlement as the workload page shows it. Both pages read a workload's JSON (queue_json)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from watchtower.domain.forms import registry
from watchtower.domain.timefmt import format_duration

# Its own pods and a quota refusal already say themselves in `why`: the pages name only the other sources.
PLAIN_SOURCES = frozenset({"pods", "quota"})


def read_from(doc: Mapping[str, Any]) -> str:
    """Return the object the wait was read from, in the words of the form whose `source` it is ("PodGroup
    trainer-0", "Volcano PodGroup ocr-train in queue vision-q", "PaddleJob status", the ResourceQuota, ...),
    else its pods' conditions."""
    for form in registry.FORMS:
        if form.read_from is not None and (words := form.read_from(doc)) is not None:
            return words
    return "its pods' PodScheduled condition"


def pods_exist(doc: Mapping[str, Any]) -> str:
    """Return "3 of 4 pods exist" when the pods it needs are known, else ""."""
    expected = doc["pods_expected"]
    return f"{doc['pods_existing']} of {expected} pods exist" if expected else ""


def preemption_words(doc: Mapping[str, Any]) -> str:
    """Return where the scheduler's preemption dry run would put it and how many it would evict, or ""."""
    node, victims = doc["preemption_node"], doc["preemption_victims"]
    if not node:
        return ""
    if victims is None:
        return f"preemption found a placement on node {node}"
    return f"preemption found a placement on node {node}, evicting {victims} pod(s)"


def gang_words(doc: Mapping[str, Any]) -> str:
    """Return how much of its gang the scheduler could place, as its message says, or ""."""
    least, placed = doc["gang_min"], doc["gang_placed"]
    if least is None:
        return ""
    if placed is None:
        return f"its gang needs {least} pods placed together"
    return f"the scheduler could place {placed} of the gang's minimum {least} pods"


def _gpus(n: int | None) -> str:
    return "not set" if n is None else str(n)


def queue_entitlement(name: str, queues: Iterable[Mapping[str, Any]]) -> dict[str, Any] | None:
    """Return the Volcano Queue `name` as the workload page shows it (rows of GPUs, weight, users); with
    `known` False when its Queue object has not been read. None when no queue is named."""
    if not name:
        return None
    q = next((q for q in queues if q["name"] == name), None)
    if q is None:
        return {"name": name, "known": False}
    cap, allocated = q["gpus_capability"], q["gpus_allocated"]
    return {
        "name": name,
        "known": True,
        "weight": q["weight"],
        "state": q["state"] or "",
        "rows": [
            ("capability", "the most it may ever use", _gpus(cap)),
            ("deserved", "its fair share: above it, other queues may reclaim", _gpus(q["gpus_deserved"])),
            ("guarantee", "reserved for it, never lent", _gpus(q["gpus_guarantee"])),
            ("allocated", "held by its running work now", _gpus(allocated)),
        ],
        "pct": round(min(100.0, 100.0 * (allocated or 0) / cap), 1) if cap else None,
        "deserved_pct": round(min(100.0, 100.0 * q["gpus_deserved"] / cap), 1)
        if cap and q["gpus_deserved"] is not None
        else None,
        "full": cap is not None and allocated is not None and allocated >= cap,
        "namespaces": ", ".join(q["namespaces"]),
        "teams": ", ".join(q["teams"]),
    }


def kueue_place(doc: Mapping[str, Any]) -> str:
    """Return a Kueue-held workload's place as the status page says it: in Kueue's queue, not the
    scheduler's; "" for one whose place is the scheduler's (or none)."""
    k = doc.get("kueue")
    if doc.get("position_queue") != "kueue" or not k:
        return ""
    where = f"ClusterQueue {k['cluster_queue']}" if k["cluster_queue"] else "its ClusterQueue"
    if k["position"] is None:
        return f"held by Kueue: its place in {where} is not known (the visibility API is not reachable)"
    return f"#{k['position'] + 1} in Kueue's queue ({where}), not yet in the scheduler's"


def kueue_words(doc: Mapping[str, Any]) -> dict[str, Any] | None:
    """Return its Kueue queue, place and the two waits (admission, then scheduling) as the page shows them;
    None when Kueue does not queue it."""
    k = doc.get("kueue")
    if not k:
        return None
    admission, scheduling = doc["admission_wait_seconds"], doc["scheduling_wait_seconds"]
    pos = k["position"]
    return {
        "workload": k["workload"],
        "queues": " → ".join(q for q in (k["local_queue"], k["cluster_queue"]) if q) or "?",
        "position": "not known (the visibility API is not reachable)"
        if pos is None and not k["admitted"]
        else (f"#{pos + 1} in its ClusterQueue" if pos is not None else ""),
        "admitted": f"admitted at {k['admitted_at']}" if k["admitted"] else "not admitted yet",
        "admission_wait": format_duration(admission) if admission is not None else "",
        "scheduling_wait": format_duration(scheduling) if scheduling is not None else "",
        "reason": k["reason"] or "",
        "message": k["message"] or "",
        "evictions": k["evictions"],
    }
