"""The gated form's JSON, key by key (domain/forms/shapes.py): what present.py returns, as /openapi.json
documents it."""

from __future__ import annotations

from typing import Literal, TypedDict

from watchtower.domain.forms.shapes import Number, Time


class WorkloadGated(TypedDict):
    """Its pods' scheduling gates and who holds them (the gated form)."""

    owner: Literal["kueue", "volcano", "other"]
    """the system that holds the gate: Kueue's plain-pod integration, Volcano's queue gate, or another"""
    gates: list[str]
    """the gates its gated pods carry (`spec.schedulingGates` names), sorted"""
    since: Time
    """its gated pods' earliest creation: when the gates took hold"""
    held_for_seconds: Number
    """how long the gates have held it, at the tick"""
    expected: bool
    """every gate is one `queue.expected_gates` names: listed as `gated`, never alerted"""


class GatedWorkloadKeys(TypedDict):
    """A workload's keys of the gated form."""

    gated: WorkloadGated | None
    """its pods' scheduling gates; null when none of its pods is gated"""
