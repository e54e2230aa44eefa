"""Why a gated workload waits, in Watchtower's words, by the system that holds its gate.

The words carry when the gate took hold, not a running "for 42m": a workload's facts are re-derived only
when its objects change, so a duration written here would freeze. The JSON's `gated.held_for_seconds` and
the page's wait are the live duration.
"""

from __future__ import annotations

from watchtower.domain.forms.gangs.records import VolcanoQueue
from watchtower.domain.forms.kueue.records import KueueFacts
from watchtower.domain.timefmt import rfc3339

_INADMISSIBLE = frozenset({"Inadmissible", "AdmissionGated"})


def kueue_words(kf: KueueFacts | None, group: str) -> str:
    """Return why Kueue holds a plain-pod group, from its Workload when the Kueue form holds one."""
    if kf is None:
        made = f"for pod group {group}" if group else "for it"
        return f"held by Kueue: no Kueue Workload {made} seen yet"
    where = f"ClusterQueue {kf.cluster_queue}" if kf.cluster_queue else f"LocalQueue {kf.local_queue or '?'}"
    said = kf.message.strip()
    if kf.admitted:
        return f"admitted by Kueue to {where}: waiting for Kueue to lift its gate"
    if kf.reason in _INADMISSIBLE:
        return f"held by Kueue: inadmissible in {where}: {said or kf.reason}"
    return f"held by Kueue: waiting for quota in {where}" + (f" ({said})" if said else "")


def volcano_words(queue: str, q: VolcanoQueue | None) -> str:
    """Return why Volcano holds a pod behind its queue-allocation gate."""
    if not queue:
        return "held by Volcano: its queue has no room"
    words = f"held by Volcano queue {queue}: its capability is used up"
    if q is not None and q.capability_gpus is not None:
        words += f" ({q.allocated_gpus or 0} of {q.capability_gpus} GPUs allocated)"
    return words


def gate_words(gates: tuple[str, ...], since: float, *, expected: bool) -> str:
    """Return why a gate no known system owns holds a pod: the gate named, and since when."""
    named = (
        f"scheduling gate{'s' if len(gates) > 1 else ''} {', '.join(gates)}" if gates else "a scheduling gate"
    )
    words = f"held by {named} since {rfc3339(since)}"
    return words + " (an expected gate: listed, not alerted)" if expected else words
