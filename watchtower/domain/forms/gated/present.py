"""The gated form in the queue's JSON (docs/json.md): a workload's `gated` object, null when no pod of it
is gated."""

from __future__ import annotations

from typing import Any

from watchtower.domain.forms.gated.records import GatedFacts
from watchtower.domain.queue_values import WorkloadStatus
from watchtower.domain.timefmt import rfc3339


def workload_json(w: WorkloadStatus) -> dict[str, Any]:
    g = w.facts.form_facts.get("gated")
    if not isinstance(g, GatedFacts):
        return {"gated": None}
    # The tick's clock, from the wait it gives: the facts carry no clock.
    since = w.facts.since
    held = w.wait_seconds + (since - g.since) if since is not None else 0.0
    return {
        "gated": {
            "owner": g.owner,
            "gates": list(g.gates),
            "since": rfc3339(g.since),
            "held_for_seconds": max(0.0, held),
            "expected": g.expected,
        }
    }
