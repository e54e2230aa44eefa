"""Why a gang waits when its pods say nothing, and why a PaddleJob waits before its pods exist.

Upstream gang scheduling holds an incomplete gang's pods in PreEnqueue with no condition and no event
(DESIGN §3.14): the words come from the group's minimum against the pods that exist. Volcano writes its
own condition on its PodGroup; a PaddleJob exists before its pods (paddle-operator creates them, and a
ResourceQuota refusal may leave no FailedCreate behind), so its namespace's quota is read directly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from watchtower.domain.forms.gangs.records import (
    REF_VOLCANO,
    SOURCE_PADDLEJOB,
    SOURCE_PODGROUP,
    SOURCE_QUOTA,
    SOURCE_VOLCANO,
    VOLCANO_WAITING_PHASES,
    Gang,
    GroupRef,
)
from watchtower.domain.forms.quota.refusals import GPU_QUOTA_RESOURCE
from watchtower.domain.records import Controller, ResourceQuota

# What each scheduler calls a gang's minimum, as the sentence names it (Volcano PodGroup spec.minMember,
# upstream PodGroup spec.schedulingPolicy.gang.minCount); a controller's pod count has no such name.
MINIMUM_TERMS = {SOURCE_PODGROUP: "minCount", SOURCE_VOLCANO: "minMember"}


def gang_incomplete(live: int, minimum: int, source: str = "") -> str:
    """Return the sentence for a gang short of pods: "gang incomplete: 3 of minCount 4 pods exist".

    `source` is where the minimum was read (a WorkloadFacts.source); a controller's count is unnamed."""
    term = MINIMUM_TERMS.get(source, "")
    return f"gang incomplete: {live} of {term + ' ' if term else ''}{minimum} pods exist"


@dataclass(frozen=True, slots=True)
class GroupWait:
    """What a pod group says about its wait: `why` when it has the words itself, else `message` to parse."""

    source: str
    pods_expected: int = 0
    why: str = ""  # set: this is the reason, whatever the pods say
    message: str = ""  # the scheduler's words on the group, to parse when the pods have none
    queue: str = ""
    group: str = ""


def group_wait(ref: GroupRef, gang: Gang | None, min_count: int, live: int) -> GroupWait | None:
    """Return what the group adds to its pods' wait; None when it is placed (the pods say the rest).

    `live` is how many of its pods exist (not finished)."""
    if ref.source == REF_VOLCANO:
        if gang is None or gang.phase not in VOLCANO_WAITING_PHASES:
            return None
        why = ""
        if not gang.message and min_count and live < min_count:
            why = gang_incomplete(live, min_count, SOURCE_VOLCANO)
        return GroupWait(SOURCE_VOLCANO, min_count, why, gang.message, gang.queue, gang.name)
    if gang is not None and gang.scheduled:
        return None
    name = gang.name if gang is not None else ref.name
    if min_count and live < min_count:
        why = gang_incomplete(live, min_count, SOURCE_PODGROUP)
        return GroupWait(SOURCE_PODGROUP, min_count, why, group=name)
    return GroupWait(SOURCE_PODGROUP, min_count, message=gang.message if gang else "", group=name)


@dataclass(frozen=True, slots=True)
class JobWait:
    """Why a PaddleJob with too few pods waits: its quota, its Volcano group, or no pods yet."""

    source: str
    why: str
    quota_blocked: bool = False
    message: str = ""  # its Volcano group's words, to parse
    queue: str = ""
    group: str = ""


def quota_words(q: ResourceQuota, asked: int) -> str:
    """Return the quota's numbers as the API server words a refusal: used + asked against hard."""
    return (
        f"ResourceQuota {q.name} at its limit: {GPU_QUOTA_RESOURCE} used {q.used_gpus or 0}"
        f" + asked {asked} > hard {q.hard_gpus}"
    )


def job_wait(
    job: Controller,
    live: int,
    gpus_made: int,
    quotas: Iterable[ResourceQuota],
    gang: Gang | None,
    operator_said: str = "",
) -> JobWait | None:
    """Return why a PaddleJob waits with `live` of its pods existing; None when all of them exist.

    `operator_said` is the operator's latest warning about it in words ("" when none is current): below
    the quota's numbers and Volcano's words, above Watchtower's own count of the pods."""
    if live >= job.pods:
        return None
    asked = max(0, job.gpus - gpus_made)
    for q in sorted(quotas, key=lambda q: q.name):
        if q.hard_gpus is not None and asked and (q.used_gpus or 0) + asked > q.hard_gpus:
            return JobWait(SOURCE_QUOTA, quota_words(q, asked), quota_blocked=True)
    if gang is not None and gang.phase in VOLCANO_WAITING_PHASES:
        # With Volcano the operator makes pods only once the group is let into its queue.
        why = (
            ""
            if gang.message
            else f"Volcano PodGroup {gang.name} is {gang.phase} in queue {gang.queue or 'default'}"
        )
        return JobWait(SOURCE_VOLCANO, why, message=gang.message, queue=gang.queue, group=gang.name)
    if operator_said:
        return JobWait(SOURCE_PADDLEJOB, operator_said)
    if live == 0:
        return JobWait(SOURCE_PADDLEJOB, "no pods created yet")
    return JobWait(SOURCE_PADDLEJOB, f"{live} of {job.pods} pods created")
