"""Preemptions and other disruptions: who was evicted, by whom, and what it cost (DESIGN §3.6-3.8)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from watchtower.domain.records import OTHER_DISRUPTION_REASONS, PREEMPTION_REASONS, Event, Pod

from .preemption_outcome import Outcome
from .tiers import TierPolicy
from .workloads import WorkloadKey, workload_of

# "Preempted by pod <uid> on node <node>" (1.26+), "Preempted by podgroup <uid> on node cluster" (1.36
# workload-aware preemption: the preemptor is the gang's PodGroup and "cluster" names no node, as the real
# scheduler writes it in tests/fixtures/real/k8s-gang-preemption.json), older "Preempted by <namespace>/<name>
# on node <node>".
_PREEMPTED_BY_UID = re.compile(r"^Preempted by (pod|podgroup|pod group) (\S+) on node (\S+)")
_PREEMPTED_BY_NAME = re.compile(r"^Preempted by ([^/\s]+)/(\S+) on node (\S+)")


@dataclass(frozen=True, slots=True)
class Preemption:
    """A pod evicted by the scheduler for a higher-priority one. Unknown facts are None or ""."""

    victim_uid: str
    victim_namespace: str
    victim_name: str
    at: float | None = None
    node: str = ""
    victim_workload: WorkloadKey | None = None
    victim_priority: int | None = None
    victim_priority_class: str = ""
    victim_gpus: int | None = None
    victim_started: float | None = None
    preemptor_uid: str = ""
    preemptor_namespace: str = ""
    preemptor_name: str = ""
    # Taken from the preemptor pod when the record first names it (it may be gone by the time anyone asks).
    preemptor_priority: int | None = None
    preemptor_priority_class: str = ""
    reason: str = ""  # the DisruptionTarget reason, or "Preempted" when only the event was seen
    # "PodGroup" when a gang preempted as a whole (preemptor_uid is then the PodGroup's); "" for a pod.
    preemptor_kind: str = ""
    # Kueue's Preempted reason (InClusterQueue, InCohortReclamation, ...) when Kueue evicted a Workload;
    # preemptor_kind is then "KueueWorkload" and victim_uid the victim Workload's.
    kueue_reason: str = ""
    # What the preemption came to (preemption_outcome.py): None while its preemptor is open, or when it is
    # not judged (a PodGroup or Kueue preemptor, a preemptor never named).
    outcome: Outcome | None = None

    @property
    def gpu_hours_lost(self) -> float | None:
        """GPUs × time since the victim started, up to its preemption."""
        if self.victim_gpus is None or self.victim_started is None or self.at is None:
            return None
        return self.victim_gpus * max(0.0, self.at - self.victim_started) / 3600.0

    def victim_tier(self, tiers: TierPolicy) -> str | None:
        """Return the victim's tier, or None when its priority is not known."""
        if self.victim_priority is None:
            return None
        return tiers.tier_of(self.victim_priority, self.victim_priority_class).name

    def preemptor_tier(self, tiers: TierPolicy) -> str | None:
        """Return the preemptor's tier, or None when its pod was never seen."""
        if self.preemptor_priority is None:
            return None
        return tiers.tier_of(self.preemptor_priority, self.preemptor_priority_class).name

    def with_outcome(self, outcome: Outcome) -> Preemption:
        """Return this record with `outcome`: a tick may stamp hundreds, and dataclasses.replace, which
        re-reads the fields' definitions at every call, took twice as long."""
        new = object.__new__(Preemption)
        for f in _FIELDS:
            object.__setattr__(new, f, getattr(self, f))
        object.__setattr__(new, "outcome", outcome)
        return new

    def attributed_to(self, pod: Pod) -> Preemption:
        """Return this record with the preemptor's identity, priority and class taken from its pod."""
        return replace(
            self,
            preemptor_uid=self.preemptor_uid or pod.uid,
            preemptor_namespace=self.preemptor_namespace or pod.namespace,
            preemptor_name=self.preemptor_name or pod.name,
            preemptor_priority=pod.priority,
            preemptor_priority_class=pod.priority_class,
        )

    def merged(self, other: Preemption) -> Preemption:
        """Return this record completed with what the other knows (pod condition + event, any order)."""
        changes = {}
        for f in self.__dataclass_fields__:
            mine, theirs = getattr(self, f), getattr(other, f)
            if (mine is None or mine == "") and theirs not in (None, ""):
                changes[f] = theirs
        # The condition's time is the eviction; the event may be later. Keep the earliest.
        if self.at is not None and other.at is not None and other.at < self.at:
            changes["at"] = other.at
        # The condition names the scheduler's reason; the event's "Preempted" is only a placeholder for it.
        if self.reason == "Preempted" and other.reason in PREEMPTION_REASONS:
            changes["reason"] = other.reason
        return replace(self, **changes) if changes else self


_FIELDS = tuple(f for f in Preemption.__slots__ if f != "outcome")


@dataclass(frozen=True, slots=True)
class Disruption:
    """A pod taken away for a reason other than preemption (eviction API, taint manager, pod GC, ...)."""

    uid: str
    namespace: str
    name: str
    reason: str
    at: float | None = None
    node: str = ""
    gpus: int = 0


def started_at(pod: Pod) -> float | None:
    """Return when the pod started holding its GPUs: status.startTime, else when it was bound."""
    return pod.start_time if pod.start_time is not None else pod.scheduled_at


def preemption_from_pod(pod: Pod) -> Preemption | None:
    """Return the preemption a pod's DisruptionTarget condition records, if it records one."""
    c = pod.disruption
    if c is None or c.status != "True" or c.reason not in PREEMPTION_REASONS:
        return None
    return Preemption(
        victim_uid=pod.uid,
        victim_namespace=pod.namespace,
        victim_name=pod.name,
        at=c.since if c.since is not None else pod.deleted_at,
        node=pod.node,
        victim_workload=workload_of(pod),
        victim_priority=pod.priority,
        victim_priority_class=pod.priority_class,
        victim_gpus=pod.gpus,
        victim_started=started_at(pod),
        reason=c.reason,
    )


def disruption_from_pod(pod: Pod) -> Disruption | None:
    """Return a non-preemption disruption the pod shows (condition or node-pressure status), if any."""
    c = pod.disruption
    if c is not None and c.status == "True" and c.reason in OTHER_DISRUPTION_REASONS:
        return Disruption(pod.uid, pod.namespace, pod.name, c.reason, c.since, pod.node, pod.gpus)
    if pod.status_reason in ("Evicted", "Preempting"):
        # Evicted: kubelet node-pressure eviction; Preempting: kubelet admitted a critical pod.
        return Disruption(
            pod.uid, pod.namespace, pod.name, pod.status_reason, pod.deleted_at, pod.node, pod.gpus
        )
    return None


def preemption_from_event(ev: Event) -> Preemption | None:
    """Return the preemption a scheduler `Preempted` event attributes, if the event is one."""
    if ev.reason != "Preempted" or ev.regarding.kind not in ("Pod", ""):
        return None
    msg = ev.message or ""
    node = preemptor_uid = preemptor_ns = preemptor_name = preemptor_kind = ""
    m = _PREEMPTED_BY_UID.match(msg)
    if m:
        preemptor_uid, node = m.group(2), m.group(3)
        if m.group(1) != "pod":
            preemptor_kind, node = "PodGroup", ""
    else:
        m2 = _PREEMPTED_BY_NAME.match(msg)
        if m2:
            preemptor_ns, preemptor_name, node = m2.group(1), m2.group(2), m2.group(3)
    rel = ev.related
    if rel is not None and rel.kind == "PodGroup":
        preemptor_kind = "PodGroup"
    if rel is not None and rel.kind in ("Pod", "", "PodGroup"):
        preemptor_uid = preemptor_uid or rel.uid
        preemptor_ns = preemptor_ns or rel.namespace
        preemptor_name = preemptor_name or rel.name
    regarding = ev.regarding
    if not regarding.uid and not regarding.name:
        return None
    return Preemption(
        victim_uid=regarding.uid,
        victim_namespace=regarding.namespace or ev.namespace,
        victim_name=regarding.name,
        at=ev.first if ev.first is not None else ev.last,
        node=node,
        preemptor_uid=preemptor_uid,
        preemptor_namespace=preemptor_ns,
        preemptor_name=preemptor_name,
        reason="Preempted",
        preemptor_kind=preemptor_kind,
    )
