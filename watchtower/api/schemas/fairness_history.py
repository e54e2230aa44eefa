"""A week's fairness history (`/api/v1/fairness/history`), as domain/fairness/fleet.py's HistoryWeek
encodes it: what another Watchtower's fleet report reads (docs/fleet.md)."""

from __future__ import annotations

from typing import Literal

from .common import Body, Number


class HistoryEpisode(Body):
    """One workload's wait from creation (or requeue) to placement, or to now while it still waits."""

    key: str
    """the workload and the second its wait began: the same whenever the same wait is seen again"""
    source: Literal["pod", "podgroup", "kueue", "quota"]
    """where the wait was seen"""
    namespace: str
    """the workload's namespace"""
    team: str
    """its team"""
    tier: str
    """its tier"""
    workload: str
    """`<kind>/<name>`"""
    gpus: int
    """GPUs it asked for"""
    started: Number
    """Unix seconds"""
    ended: Number | None
    """Unix seconds; null while it waits"""
    outcome: Literal["waiting", "scheduled", "admitted", "gone"]
    """how the wait ended (`gone`: deleted while waiting)"""


class HistoryPreemption(Body):
    """One workload preempted by another (the preemptor may be unknown: empty names, tier `unknown`)."""

    key: str
    """the victim pod's uid (a Kueue Workload's uid and the time of its `Preempted` condition)"""
    at: Number
    """Unix seconds"""
    victim_namespace: str
    """the victim's namespace"""
    victim_team: str
    """the victim's team"""
    victim_tier: str
    """the victim's tier"""
    victim_workload: str
    """the victim's `<kind>/<name>`"""
    preemptor_namespace: str
    """the preemptor's namespace, empty when unknown"""
    preemptor_team: str
    """the preemptor's team, empty when unknown"""
    preemptor_tier: str
    """the preemptor's tier, `unknown` when unknown"""
    preemptor_workload: str
    """the preemptor's `<kind>/<name>`, empty when unknown"""
    gpus: int
    """the victim's GPUs"""
    gpu_hours_lost: Number | None
    """GPUs × time since the victim started; null when its start is unknown"""
    outcome: str
    """`helped` (its preemptor started on the node it left), `did_not_help`, or empty while undecided or
    never judged"""
    outcome_reason: str
    """why it did not help: `started_elsewhere`, `still_waiting`, `room_taken` or `deleted`; else empty"""


class HistoryIncident(Body):
    """A starvation (a wait past its tier's critical threshold) or a gang stall."""

    key: str
    """the kind, the episode's workload and start"""
    kind: Literal["starvation", "gang_stall"]
    """which"""
    namespace: str
    """the workload's namespace"""
    team: str
    """its team"""
    tier: str
    """its tier"""
    workload: str
    """`<kind>/<name>`"""
    gpus: int
    """its GPUs"""
    started: Number
    """Unix seconds"""
    ended: Number | None
    """Unix seconds; null while it lasts"""


class FairnessHistory(Body):
    """`/api/v1/fairness/history?week=W`: what this cluster's fairness report of the week reads from its
    history, for another Watchtower's fleet report."""

    week: str
    """the ISO week, `YYYY-Www`"""
    timezone: str
    """`fairness.timezone`: the week's bounds are in it"""
    start: Number
    """the week's start, Unix seconds"""
    end: Number
    """the week's end, Unix seconds"""
    since: Number
    """the start of the trend's first week (7 weeks before): the episodes overlap [since, end)"""
    episodes: list[HistoryEpisode]
    """the wait episodes overlapping [since, end)"""
    preemptions: list[HistoryPreemption]
    """the preemptions in [start, end)"""
    incidents: list[HistoryIncident]
    """the incidents overlapping [start, end)"""
    history_hours: Number
    """hours of the week the service was recording"""
