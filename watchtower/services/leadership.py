"""Who leads: a sole process (leader election off), or the holder of a Lease won by the election loop.

The loop is client-go's, written small: read the Lease, decide (`domain.leader.decide`), write with the
`resourceVersion` read; a leader renews every retry period and stops leading the moment its last good
renewal is a renew deadline old; a candidate retries with jitter. Leading is a term, numbered by the
Lease's `leaseTransitions`: every leader-only side effect carries the term it was decided under and checks,
right before it happens, that this process still leads under it (`holds`).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import secrets
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from prometheus_client import CollectorRegistry, Counter, Gauge

from watchtower.domain.leader import (
    JITTER,
    Leadership,
    LeaseConflict,
    LeaseRecord,
    Step,
    Timings,
    claimed,
    decide,
    deposed,
    released,
)
from watchtower.domain.promql.names import LEADER, LEADER_TRANSITIONS
from watchtower.ports import Clock, LeaseApi

log = logging.getLogger(__name__)

T = TypeVar("T")


def replica_identity(name: str) -> str:
    """Return a holder identity for a replica called `name`: unique per process, so a restarted pod
    (same name) is not mistaken for the leader it replaces while that one's lease runs."""
    return f"{name}_{secrets.token_hex(4)}"


class LeaderMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.leader = Gauge(
            LEADER, "1 while this replica leads (evaluates alerts, delivers), else 0", registry=registry
        )
        self.transitions = Counter(
            LEADER_TRANSITIONS, "Times this replica became leader or stopped being it", registry=registry
        )


class SoleLeader:
    """Leader election off: this process leads, always, under term 0 (one replica, as before HA)."""

    def __init__(self, identity: str = "") -> None:
        self.identity = identity or f"pid-{os.getpid()}"

    def term(self) -> int | None:
        return 0

    def holds(self, term: int) -> bool:
        return term == 0

    def status(self) -> Leadership:
        return Leadership(
            enabled=False, leader=True, identity=self.identity, holder=self.identity, transitions=0
        )


class LeaderElector:
    """Campaigns for the Lease and keeps it; `on_change(True/False)` is told when leading starts or stops."""

    def __init__(
        self,
        *,
        api: LeaseApi,
        identity: str,
        timings: Timings,
        clock: Clock,
        monotonic: Callable[[], float] = time.monotonic,
        rnd: Callable[[], float] = random.random,
        metrics: LeaderMetrics | None = None,
    ) -> None:
        self.api, self.identity, self.timings, self.clock = api, identity, timings, clock
        self.monotonic, self.rnd, self.metrics = monotonic, rnd, metrics
        self.on_change: Callable[[bool], None] | None = None
        self._lease: LeaseRecord | None = None  # as last read or written
        self._leading = False
        self._term: int | None = None
        self._renewed_at: float | None = None  # monotonic: when the last successful write was sent
        self._deadline: asyncio.TimerHandle | None = None
        self._failing = False
        self._seen: tuple[str, float] | None = (
            None  # the Lease's resourceVersion, when first seen (monotonic)
        )
        # Renewals must not queue behind a storm's store writes in the loop's shared thread pool.
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="lease")

    # ---- the fence ---------------------------------------------------------------------------------

    def term(self) -> int | None:
        return self._term if self.holds_now() else None

    def holds(self, term: int) -> bool:
        return self._term == term and self.holds_now()

    def holds_now(self) -> bool:
        return self._leading and not deposed(
            renewed_at=self._renewed_at, now=self.monotonic(), timings=self.timings
        )

    def status(self) -> Leadership:
        lease = self._lease
        return Leadership(
            enabled=True,
            leader=self.holds_now(),
            identity=self.identity,
            holder=lease.holder if lease is not None else "",
            transitions=lease.transitions if lease is not None else 0,
        )

    # ---- the loop ----------------------------------------------------------------------------------

    async def run(self) -> None:
        """Campaign, lead and renew until cancelled (leading stops with it; `release` hands the Lease on)."""
        log.info("leader election on %s as %s", self.api.where, self.identity)
        try:
            while True:
                await self.try_once()
                await asyncio.sleep(self._pause())
        finally:
            self._set(False)

    def _pause(self) -> float:
        t = self.timings.retry_period
        # A leader renews on time; candidates spread out so they do not all race for a released Lease.
        return t if self._leading else t * (1 + JITTER * self.rnd())

    async def try_once(self) -> Step | None:
        """Make one attempt to acquire or renew; return the step taken (None when the API call failed)."""
        now, sent = self.clock.now(), self.monotonic()
        try:
            lease = (
                self._lease if self._leading and self._lease is not None else await self._off(self.api.get)
            )
            step = decide(
                lease, identity=self.identity, now=now, unchanged_for=self._unchanged_for(lease, sent)
            )
            if step is Step.STANDBY:
                self._lease = lease
                self._set(False)
                self._recovered()
                return step
            new = claimed(lease, identity=self.identity, now=now, timings=self.timings)
            write = self.api.create if step is Step.CREATE else self.api.update
            self._lease = await self._off(write, new)
        except LeaseConflict as e:
            # Someone else wrote it since: read it afresh at the next try.
            log.info("%s changed under us (%s): reading it again", self.api.where, e)
            self._lease = None
            self._check_deadline()
            return None
        except Exception as e:  # the API server down, refused, slow: retried; the deadline decides
            if not self._failing:
                log.warning("%s: %s: %s", self.api.where, type(e).__name__, str(e)[:300])
                self._failing = True
            self._check_deadline()
            return None
        self._recovered()
        self._renewed_at = sent
        self._set(True, term=self._lease.transitions)
        self._arm_deadline()
        return step

    def _unchanged_for(self, lease: LeaseRecord | None, now: float) -> float | None:
        """Return how long (monotonic) this replica has seen `lease` as it is: every write changes its
        resourceVersion, so a holder that renews resets it. A Lease first seen now counts from now: a
        replica started beside a Lease nobody renews waits one lease duration, as client-go's does."""
        if lease is None:
            self._seen = None
            return None
        if self._seen is None or self._seen[0] != lease.resource_version:
            self._seen = (lease.resource_version, now)
        return now - self._seen[1]

    async def release(self) -> bool:
        """Stop leading and hand the Lease back (no holder), so a follower takes it at its next try;
        return True when the Lease was released. Call it once the loop (`run`) is cancelled."""
        lease = self._lease
        self._set(False)
        try:
            for _ in range(2):
                if lease is None:
                    lease = await self._off(self.api.get)
                if lease is None or lease.holder != self.identity:
                    return False
                # Whether it still holds it is the server's to say: the update fails (409) if anyone
                # wrote the Lease since this replica last did.
                try:
                    self._lease = await self._off(self.api.update, released(lease, now=self.clock.now()))
                except LeaseConflict:
                    lease = None  # a renewal cut short by the cancellation may still have landed
                    continue
                log.info("%s released", self.api.where)
                return True
        except Exception as e:  # it expires by itself after the lease duration
            log.warning("%s not released (%s): a follower takes it when it expires", self.api.where, e)
        return False

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ---- inside ------------------------------------------------------------------------------------

    async def _off(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(self._pool, fn, *args)

    def _recovered(self) -> None:
        if self._failing:
            log.info("%s reachable again", self.api.where)
            self._failing = False

    def _check_deadline(self) -> None:
        if self._leading and not self.holds_now():
            log.warning(
                "%s not renewed for %g s (renew deadline): no longer leading",
                self.api.where,
                self.timings.renew_deadline,
            )
            self._set(False)

    def _arm_deadline(self) -> None:
        """Stop leading at the renew deadline even if the loop is stuck in a call that has not timed out."""
        if self._deadline is not None:
            self._deadline.cancel()
        assert self._renewed_at is not None
        left = self._renewed_at + self.timings.renew_deadline - self.monotonic()
        # A hair late: the loop may run a timer up to its clock resolution early.
        self._deadline = asyncio.get_running_loop().call_later(max(0.0, left) + 0.01, self._check_deadline)

    def _set(self, leading: bool, *, term: int | None = None) -> None:
        if not leading and self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        changed = leading != self._leading or (leading and term != self._term)
        self._leading = leading
        self._term = term if leading else None
        if not changed:
            return
        if leading:
            log.info("leading: %s holds %s (transition %s)", self.identity, self.api.where, term)
        else:
            log.info("not leading: %s", self.identity)
        if self.metrics is not None:
            self.metrics.leader.set(1 if leading else 0)
            self.metrics.transitions.inc()
        if self.on_change is not None:
            self.on_change(leading)
