"""Leader election on a `coordination.k8s.io/v1` Lease: what a replica does next, given the Lease as read.

Only the decisions live here; reading and writing the Lease is the adapter's, the loop is the service's.
The rules are client-go's: a replica that holds the Lease renews it; a Lease released (no holder) or not
renewed for its `leaseDurationSeconds` may be taken; `leaseTransitions` grows by one each time the holder
changes; a leader that could not renew for the renew deadline stops leading.

Times are Unix epoch seconds by the replica's own wall clock, since `renewTime` is one. Whether another
replica's Lease has run out is judged as client-go judges it: by how long this replica has seen it unchanged
(its own clock, `unchanged_for`), never by comparing the holder's `renewTime` with its own clock; so a
constant skew between replicas does not matter, only clocks that run at different rates: the margin between
the renew deadline (when a leader that cannot renew stops) and the lease duration (when another takes over)
absorbs that, 5 s with client-go's defaults.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import Enum

# client-go's defaults (tools/leaderelection): the Lease lasts 15 s, a leader gives up after failing to
# renew for 10 s, and everyone retries every 2 s. Candidates wait up to 20 % longer, at random, so that
# they do not all race for a released Lease at once.
LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER = 0.2


class LeaseConflict(Exception):
    """The Lease changed since it was read (HTTP 409 on update, or it already exists on create)."""


@dataclass(frozen=True, slots=True)
class Timings:
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def problems(self) -> list[str]:
        """Return what is wrong with these timings (client-go's checks), one sentence each."""
        out = []
        if not self.lease_duration > self.renew_deadline:
            out.append("lease_duration must be longer than renew_deadline")
        # As client-go: a leader gets more than one try, jitter included, before it must give up.
        if not self.renew_deadline > (1 + JITTER) * self.retry_period:
            out.append(f"renew_deadline must be longer than {1 + JITTER:g} × retry_period")
        return out

    @property
    def lease_seconds(self) -> int:
        """The whole seconds written as `leaseDurationSeconds` (rounded up: never shorter than configured)."""
        return max(1, math.ceil(self.lease_duration))


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """A Lease's spec as read (and its `resourceVersion`, for the optimistic update)."""

    holder: str = ""  # holderIdentity; "" when released or never held
    duration: float = 0.0  # leaseDurationSeconds
    acquire_time: float | None = None
    renew_time: float | None = None
    transitions: int = 0  # leaseTransitions
    resource_version: str = ""

    def expires_at(self) -> float | None:
        """Return when this Lease may be taken over; None when it has never been renewed."""
        return None if self.renew_time is None else self.renew_time + self.duration


class Step(Enum):
    CREATE = "create"  # there is no Lease: create it, holding it
    ACQUIRE = "acquire"  # released or expired: write ourselves in as its holder
    RENEW = "renew"  # ours: move renewTime on
    STANDBY = "standby"  # another replica's, still valid: watch it


def decide(
    lease: LeaseRecord | None, *, identity: str, now: float, unchanged_for: float | None = None
) -> Step:
    """Return what a replica named `identity` does with the Lease it read at `now`.

    `unchanged_for`: how long, by this replica's own clock, it has seen this very Lease (same
    resourceVersion) unchanged. Given, the Lease runs out when that reaches its duration, as client-go
    judges it (its `observedTime`): the holder's `renewTime` is the holder's clock, and a replica whose
    clock runs ahead would otherwise take a Lease that is being renewed. Without it, `renewTime` is
    compared with `now`, which is only right when the clocks agree.
    """
    if lease is None:
        return Step.CREATE
    if lease.holder == identity:
        return Step.RENEW
    if not lease.holder:
        return Step.ACQUIRE
    if unchanged_for is not None:
        return Step.ACQUIRE if unchanged_for >= lease.duration else Step.STANDBY
    expires = lease.expires_at()
    if expires is None or now >= expires:
        return Step.ACQUIRE
    return Step.STANDBY


def claimed(lease: LeaseRecord | None, *, identity: str, now: float, timings: Timings) -> LeaseRecord:
    """Return the Lease to write for CREATE, ACQUIRE or RENEW: held by `identity`, renewed at `now`.

    Taking it from another holder (or from none, after a release) counts one transition; renewing keeps
    the acquire time and the count."""
    if lease is None:
        return LeaseRecord(identity, timings.lease_seconds, now, now, 0, "")
    if lease.holder == identity:
        return replace(lease, duration=timings.lease_seconds, renew_time=now)
    return replace(
        lease,
        holder=identity,
        duration=timings.lease_seconds,
        acquire_time=now,
        renew_time=now,
        transitions=lease.transitions + 1,
    )


def released(lease: LeaseRecord, *, now: float) -> LeaseRecord:
    """Return the Lease to write when its holder steps down (client-go's ReleaseOnCancel): no holder, so a
    waiting replica takes it at its next try rather than after the lease duration."""
    return replace(lease, holder="", duration=1, renew_time=now)


def deposed(*, renewed_at: float | None, now: float, timings: Timings) -> bool:
    """Return True when a leader whose last successful renewal began at `renewed_at` must stop leading.

    Measured from when the renewal was sent, not when its answer came: the Lease the server stored may
    be that old."""
    return renewed_at is None or now - renewed_at >= timings.renew_deadline


@dataclass(frozen=True, slots=True)
class Leadership:
    """Who leads, as this replica knows it: what `/readyz` and `/healthz` show."""

    enabled: bool  # False: leader election is off and this process is the leader, as a single replica
    leader: bool
    identity: str
    holder: str  # the Lease's holder as last read ("" unknown or released)
    transitions: int  # the Lease's leaseTransitions as last read: the fencing token of the current term

    @property
    def role(self) -> str:
        return "leader" if self.leader else "follower"
