"""What an alert is: a label set (its identity) with annotations, as a rule states it at one moment."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

# The labels every workload alert carries, in the order people read them.
WORKLOAD_LABELS = ("namespace", "team", "workload", "kind", "tier", "priority_class", "gpus")


def fingerprint(labels: Mapping[str, str]) -> str:
    """Return a stable hash of the sorted label set: the alert's identity, as in Alertmanager."""
    h = hashlib.sha256()
    for k in sorted(labels):
        # \xff cannot occur in valid UTF-8, so no two label sets can serialise the same way.
        h.update(k.encode())
        h.update(b"\xff")
        h.update(labels[k].encode())
        h.update(b"\xff")
    return h.hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class AlertCandidate:
    """A rule's finding at one evaluation: the alert is active now."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.labels)

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")


class AlertState(StrEnum):
    PENDING = "pending"  # active, but not yet for its `for` duration
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class TrackedAlert:
    """An alert across evaluations: when it became active, fired, was last seen and resolved."""

    fingerprint: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    state: AlertState
    active_at: float  # first evaluation that found it active (this episode)
    last_seen: float  # last evaluation that found it active
    fired_at: float | None = None
    resolved_at: float | None = None

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")
