"""What an alert is: a label set (its identity) with annotations, as a rule states it at one moment."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from itertools import chain

from . import gotext

# The labels every workload alert carries, in the order people read them.
WORKLOAD_LABELS = ("namespace", "team", "workload", "kind", "tier", "priority_class", "gpus")


def fingerprint(labels: Mapping[str, str]) -> str:
    """Return the alert's identity as Alertmanager computes it: the label set's FNV-1a 64 fingerprint
    (prometheus/common `LabelSet.Fingerprint()`), 16 hex digits, so an alert is the same alert in both."""
    return _fingerprint_of(tuple(chain.from_iterable(labels.items())))


@lru_cache(maxsize=1 << 15)
def _fingerprint_of(pairs: tuple[str, ...]) -> str:
    # Cached per label set: the rules raise the same 10,000 alerts of a storm again every evaluation, and
    # hashing a tuple of the pairs is a third of the cost of hashing their bytes in Python.
    return gotext.fingerprint(dict(zip(pairs[::2], pairs[1::2], strict=True)))


class Labelled:
    """What an alert's labels say of it: its name and its severity (set by the rule that raised it)."""

    __slots__ = ()
    labels: Mapping[str, str]

    @property
    def alertname(self) -> str:
        return self.labels.get("alertname", "")

    @property
    def severity(self) -> str:
        return self.labels.get("severity", "")


@dataclass(frozen=True, slots=True)
class AlertCandidate(Labelled):
    """A rule's finding at one evaluation: the alert is active now."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    # Computed once: the lifecycle, the dispatcher and the store all ask for it.
    fingerprint: str = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fingerprint", fingerprint(self.labels))


class AlertState(StrEnum):
    PENDING = "pending"  # active, but not yet for its `for` duration
    FIRING = "firing"
    RESOLVED = "resolved"


@dataclass(frozen=True, slots=True)
class TrackedAlert(Labelled):
    """An alert across evaluations: when it became active, fired, was last seen and resolved."""

    fingerprint: str
    labels: Mapping[str, str]
    annotations: Mapping[str, str]
    state: AlertState
    active_at: float  # first evaluation that found it active (this episode)
    last_seen: float  # last evaluation that found it active
    fired_at: float | None = None
    resolved_at: float | None = None
