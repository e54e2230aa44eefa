"""A PaddleJob's status as paddle-operator writes it.

Shapes from PaddleFlow/paddle-operator api/v1/paddlejob_types.go (PaddleJobStatus, ResourceStatus),
controllers/paddlejob_helper.go (getPaddleJobPhase) and controllers/paddlejob_controller.go
(syncCurrentStatus: per-role counts from the pods' phases).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from watchtower.simulator.objects import ts


def paddle_status(
    replicas: Mapping[str, int], pods: Iterable[tuple[str, str]], *, old: Mapping[str, Any], now: float
) -> dict[str, Any]:
    """Return a PaddleJob's status from its pods' (role, phase), as the operator's syncCurrentStatus does.

    A role appears only once it has a pod; the phase follows getPaddleJobPhase, read from the new counts
    (the operator reads the previous ones, then its own status write makes it reconcile again)."""
    roles: dict[str, dict[str, int]] = {}
    for role, phase in pods:
        counts = roles.setdefault(role, {})
        key = {"Pending": "pending", "Running": "running", "Failed": "failed", "Succeeded": "succeeded"}.get(
            phase
        )
        if key is not None:
            counts[key] = counts.get(key, 0) + 1

    def every(what: str) -> bool:
        return all(roles.get(r, {}).get(what, 0) == n for r, n in replicas.items())

    def some(what: str) -> bool:
        return any(c.get(what, 0) > 0 for c in roles.values())

    before = old.get("phase")
    if before in ("Completed", "Failed"):
        phase = before
    elif some("failed"):
        phase = "Failed"
    elif every("running"):
        phase = "Running"
    elif every("succeeded"):
        phase = "Completed"
    elif some("pending"):
        phase = "Pending"
    elif some("starting"):  # a Running pod not yet ready; the simulator's pods are ready once running
        phase = "Starting"
    else:
        phase = "Pending"
    status: dict[str, Any] = {"phase": phase, "mode": "PS" if "ps" in replicas else "Collective"}
    # omitempty: a zero count is not written
    status.update({role: {k: v for k, v in c.items() if v} for role, c in roles.items()})
    # getPaddleJobStartTime / getPaddleJobCompleteTime: stamped once, kept after.
    for key, when in (("startTime", ("Running",)), ("completionTime", ("Completed", "Failed"))):
        if key in old:
            status[key] = old[key]
        elif phase in when:
            status[key] = ts(now)
    return status
