"""Liveness and readiness bodies."""

from __future__ import annotations

from .common import Body

SourceValue = str | int | float | bool | None


class LeaderStatus(Body):
    """Who leads (evaluates alerts, delivers notifications, pushes to Alertmanager), as this replica knows."""

    enabled: bool
    """leader election is on (`leader_election.enabled`); off, the process always leads"""
    role: str
    """`leader` or `follower`"""
    identity: str
    """this replica's holder identity (pod name and a random suffix)"""
    holder: str
    """the Lease's holder as last read (empty: released or not read yet)"""
    transitions: int
    """the Lease's `leaseTransitions` as last read: the term a leader's notifications are fenced by"""


class Health(Body):
    status: str
    """`ok` while the process serves"""
    leadership: LeaderStatus
    """leader or follower, the Lease holder and its transition count"""


class KindReadiness(Body):
    """One watched kind: listed yet, how much it changed, how stale it may be."""

    listed: bool
    """listed at least once"""
    objects_at_list: int
    """objects the latest list held"""
    changes: int
    """watch events applied since"""
    seconds_since_change: float | None
    """since the latest change (null before the first)"""
    stale_seconds: float | None
    """how long the picture of this kind may have missed changes (0 while a watch is open)"""
    restarts: int
    """watches opened again and full relists of this kind"""
    source: dict[str, SourceValue] | None = None
    """the source's own figures for this kind, as it reports them (the Kubernetes source: `synced`,
    `connected`, `resource_version`, `relists`, `bad_lines`, `last_error`, ...); absent when it reports none"""


class Readiness(Body):
    """`/readyz`: 200 once every kind has been listed and the picture is fresh; 503 otherwise."""

    ready: bool
    """every kind listed and the picture fresh"""
    problems: list[str]
    """why not, one sentence each"""
    stale_seconds: float | None
    """how stale the picture may be: the stalest kind"""
    stale_after_seconds: float
    """the limit past which it is not ready"""
    evaluated_at: float | None
    """the latest evaluation, in seconds since the epoch (null before the first)"""
    skipped_objects: dict[str, int]
    """kind → malformed objects skipped"""
    kinds: dict[str, KindReadiness]
    """per watched kind"""
    leadership: LeaderStatus
    """leader or follower (a follower is ready too: it serves the API), the holder, the transition"""
