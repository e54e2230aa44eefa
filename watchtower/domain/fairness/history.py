"""What the service records as it watches, durably, for the weekly report.

Every record has a `key` that is the same whenever the same fact is seen again (a restart, a re-list, a
replayed watch, a second replica), so recording is an upsert and a fact is never counted twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

# Where a wait was seen: a pending pod, a gang held by its PodGroup, a Workload Kueue has not admitted, work
# refused by a ResourceQuota (FailedCreate ... exceeded quota) before it had pods.
WaitSource = Literal["pod", "podgroup", "kueue", "quota"]
# scheduled/admitted: the wait ended with the work placed; gone: deleted while still waiting; waiting: not over.
WaitOutcome = Literal["waiting", "scheduled", "admitted", "gone"]
IncidentKind = Literal["starvation", "gang_stall"]


@dataclass(frozen=True, slots=True)
class WaitEpisode:
    """One workload's wait from creation (or requeue) to placement, or to now while it still waits."""

    # The workload (namespace/kind/name) + the second its wait began: a requeue starts a new episode; the
    # source is left out, so a refused job whose pods are then made stays one episode (record.episode_key).
    key: str
    source: WaitSource
    namespace: str
    team: str
    tier: str
    workload: str  # "<kind>/<name>", as alerts and the status page name it
    gpus: int
    started: float  # Unix seconds
    ended: float | None  # None while waiting
    outcome: WaitOutcome


@dataclass(frozen=True, slots=True)
class PreemptionRecord:
    """One workload preempted by another (the preemptor may be unknown: empty names, tier "unknown")."""

    # The victim pod's uid (preempted once: it is deleted); a Kueue Workload's uid + the time of its Preempted
    # condition, since a Workload is requeued and may be preempted again (record.preemption_key).
    key: str
    at: float
    victim_namespace: str
    victim_team: str
    victim_tier: str
    victim_workload: str
    preemptor_namespace: str
    preemptor_team: str
    preemptor_tier: str
    preemptor_workload: str
    gpus: int
    gpu_hours_lost: float | None  # gpus × time since the victim started; None when its start is unknown
    # What the preemption came to (domain/preemption_outcome.py): "helped", "did_not_help", or "" while
    # undecided or never judged; the reason when it did not help.
    outcome: str = ""
    outcome_reason: str = ""


@dataclass(frozen=True, slots=True)
class Incident:
    """A starvation (a wait past its tier's critical threshold) or a gang stall, from start to end."""

    key: str  # kind + the episode's workload and start (record.incident_key)
    kind: IncidentKind
    namespace: str
    team: str
    tier: str
    workload: str
    gpus: int
    started: float
    ended: float | None
