"""What every API object shares: metav1 times, UIDs, owner references, conditions, the List wrapper."""

from __future__ import annotations

import uuid as _uuid
from datetime import UTC, datetime
from typing import Any


def ts(t: float | None) -> str | None:
    """metav1.Time: RFC 3339, second precision, UTC with Z."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_ts(t: float) -> str:
    """metav1.MicroTime, as eventTime is written."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def new_uid(seed: str | None = None) -> str:
    return str(_uuid.uuid5(_uuid.NAMESPACE_URL, seed)) if seed is not None else str(_uuid.uuid4())


def owner_ref(kind: str, name: str, *, api_version: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def condition(
    type_: str, status: str, at: float, *, reason: str | None = None, message: str | None = None
) -> dict[str, Any]:
    c: dict[str, Any] = {"type": type_, "status": status, "lastProbeTime": None, "lastTransitionTime": ts(at)}
    if reason:
        c["reason"] = reason
    if message:
        c["message"] = message
    return c


def object_list(items: list[dict[str, Any]]) -> dict[str, Any]:
    """The List `kubectl get a,b,c -A -o json` prints."""
    return {"apiVersion": "v1", "kind": "List", "metadata": {"resourceVersion": ""}, "items": items}
