"""Preemptions, as `queue_json.preemption_dict` presents them (docs/json.md, "preemptions")."""

from __future__ import annotations

from .common import Body, Number, Time


class VictimWorkload(Body):
    kind: str
    """the victim's workload kind"""
    name: str
    """the victim's workload name"""


class PreemptionOutcome(Body):
    """What the preemption came to: whether its preemptor started on the node its victims left."""

    verdict: str
    """`helped` (the preemptor started on a node its victims were evicted from) or `did_not_help`"""
    reason: str | None
    """null when it helped; else `started_elsewhere` (the preemptor bound to another node, `node`),
    `still_waiting` (not bound within `queue.preemption_outcome_window`), `room_taken` (not bound, and
    `taken_by` bound where the victims were) or `deleted` (gone before it bound)"""
    words: str
    """the outcome in the page's words"""
    at: Time | None
    """when it was decided: the preemptor's binding, its deletion, or the window's end"""
    node: str | None
    """where the preemptor started, if it did"""
    victim_nodes: list[str]
    """the nodes its victims were evicted from"""
    nominated_node: str | None
    """the preemptor's `status.nominatedNodeName` as last seen"""
    taken_by: str | None
    """namespace/name of a pod that bound on the victims' node after their eviction, when one did"""
    victims: int
    """the preemptor's victims when it was decided"""
    gpu_hours_lost: Number
    """what those victims had run, thrown away when it did not help"""


class Preemption(Body):
    """One victim pod evicted by the scheduler to make room, however often it is replayed."""

    victim_uid: str
    """the evicted pod's uid"""
    victim_namespace: str
    """the evicted pod's namespace"""
    victim_name: str
    """the evicted pod's name"""
    victim_workload: VictimWorkload | None
    """its workload"""
    victim_tier: str | None
    """null when only the event was seen"""
    victim_priority: int | None
    """null when only the event was seen"""
    preemptor_uid: str | None
    """from the event (message or `related`)"""
    preemptor_kind: str
    """`Pod`, `PodGroup` when a 1.36 gang preempted as a whole, or `KueueWorkload` when Kueue evicted the
    victim's Workload (victim_uid is then the Workload's)"""
    preemptor_namespace: str | None
    """from the event, or the preemptor pod if it is known"""
    preemptor_name: str | None
    """from the event, or the preemptor pod if it is known"""
    preemptor_tier: str | None
    """of the preemptor pod, if it is known"""
    node: str | None
    """where the victim ran"""
    at: Time | None
    """the `DisruptionTarget` condition's `lastTransitionTime` (else the event time)"""
    gpus: int | None
    """the victim's GPUs"""
    ran_seconds: Number | None
    """from its `status.startTime` (else binding) to `at`"""
    gpu_hours_lost: Number | None
    """`gpus × ran_seconds / 3600`"""
    reason: str
    """the condition reason (`PreemptionByScheduler`, ...), or `Preempted` when only the event was seen (and
    for Kueue)"""
    kueue_reason: str | None
    """Kueue's `Preempted` reason (`InClusterQueue`, `InCohortReclamation`, `InCohortFairSharing`,
    `InCohortReclaimWhileBorrowing`); null when the scheduler preempted"""
    outcome: PreemptionOutcome | None
    """null while the preemptor has neither started nor run out of `queue.preemption_outcome_window`, and
    for preemptors that are not a pod (a PodGroup, Kueue) or were never named"""


class Preemptions(Body):
    """`/api/v1/preemptions`: the preemptions in `queue.preemption_window`, newest first."""

    at: Time | None
    """the evaluation the list is from"""
    count: int
    """preemptions matching the filter (before `limit`)"""
    preemptions: list[Preemption]
    """at most `limit` of them"""
