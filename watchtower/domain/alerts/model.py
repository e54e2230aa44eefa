"""What an alert is: a label set (its identity) with annotations, as a rule states it at one moment."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass, field
from enum import StrEnum
from functools import lru_cache
from itertools import chain

from . import gotext

# The labels every workload alert carries, in the order people read them.
WORKLOAD_LABELS = ("namespace", "team", "workload", "kind", "tier", "priority_class", "gpus")


def fingerprint(labels: Mapping[str, str], unkeyed: str | None = None) -> str:
    """Return the alert's identity as Alertmanager computes it: the label set's FNV-1a 64 fingerprint
    (prometheus/common `LabelSet.Fingerprint()`), 16 hex digits, so an alert is the same alert in both.

    `unkeyed` names a label left out of the identity: the cluster label, the same on every alert of one
    replica, added after alerts were first stored; keyed, it would make every stored alert a new one."""
    if unkeyed is not None and unkeyed in labels:
        labels = {k: v for k, v in labels.items() if k != unkeyed}
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
    unkeyed: str | None = None  # a label left out of the fingerprint (see `fingerprint`)
    # Computed once: the lifecycle, the dispatcher and the store all ask for it.
    fingerprint: str = field(init=False, compare=False, repr=False)
    # Given by `with_cluster`, which knows it already: the labels but the unkeyed one are the original's.
    known: InitVar[str | None] = None

    def __post_init__(self, known: str | None) -> None:
        object.__setattr__(self, "fingerprint", known or fingerprint(self.labels, self.unkeyed))


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
    unkeyed: str | None = None  # the label its fingerprint leaves out, as its candidate's


def with_cluster(candidates: Iterable[AlertCandidate], label: str, name: str | None) -> list[AlertCandidate]:
    """Return the candidates carrying `label: name`, the cluster they were raised in, outside their identity.

    A rule that already sets a label of that name keeps its own value (and its identity), and without a
    name the candidates are returned as they are."""
    if name is None:
        return list(candidates)
    return [
        c
        if label in c.labels or c.unkeyed is not None
        else AlertCandidate({**c.labels, label: name}, c.annotations, label, c.fingerprint)
        for c in candidates
    ]
