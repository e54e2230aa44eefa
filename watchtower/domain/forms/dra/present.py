"""The DRA form in the queue's JSON (docs/json.md): a workload's GPU claims and what its scheduler's message
says of them, and the document's pods naming a claim, template or class that is not there."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol

from watchtower.domain.forms.dra.messages import problem_of
from watchtower.domain.forms.dra.records import UnresolvedClaim
from watchtower.domain.queue_values import WorkloadStatus


class UnresolvedSource(Protocol):
    """What the DRA section reads of the cluster state (a Protocol: the state imports the registry)."""

    def unresolved_claims(self) -> Iterable[UnresolvedClaim]: ...


def workload_json(w: WorkloadStatus) -> dict[str, Any]:
    d = w.diagnosis
    p = problem_of(tuple(r.reason for r in d.reasons)) if d is not None else None
    return {
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
        "dra_problem": p.value if p is not None else None,
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


def queue_json(state: UnresolvedSource, now: float) -> dict[str, Any]:
    return {"dra_problems": [dra_problem_dict(u, now) for u in state.unresolved_claims()]}
