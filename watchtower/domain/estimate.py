"""When a waiting workload may start: its place in its tier and its tier's recent time to schedule.

`ScheduleHistory` keeps the waits of the pods seen leaving the queue (the queue tracker's PodScheduled
happenings) within a window; each tick freezes it into `TierWaits`, every tier's waits sorted once, so
that an estimate is a bisection, cheap at 20,000 waiting workloads. The estimate is conditional on the
wait so far: among recent waits longer than this one's, the median is when it would start. It is an
estimate and says so, with its basis; with too little history it says "no estimate" and why.
"""

from __future__ import annotations

from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field

from watchtower.domain.forms.kueue.records import SOURCE_KUEUE
from watchtower.domain.queue_values import WorkloadFacts, WorkloadState, WorkloadStatus
from watchtower.domain.records import Pod

from .estimate_accuracy import TierAccuracy, range_words
from .timefmt import format_duration


def _window_words(seconds: float) -> str:
    # "6 h" / "30 min", as the basis reads ("pods scheduled in the last 6 h")
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)} h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)} min"
    return format_duration(seconds)


def _spoken(seconds: float) -> str:
    return format_duration(seconds, spoken=True)


@dataclass(frozen=True, slots=True)
class StartEstimate:
    """A workload's place in its tier and when it may start; `start_in` None is "no estimate"."""

    position: int | None  # 1-based among its tier's queued workloads; None when not queued (quota, gates)
    start_in: float | None  # seconds from the tick
    at: float | None  # the tick's time plus start_in
    samples: int  # recent waits the estimate rests on (those longer than the wait so far)
    basis: str  # "from 37 medium pods scheduled in the last 6 h: median 12m", or why there is none
    never: bool = False  # it can never start as configured: `basis` says why, and there is no estimate
    # How good the tier's estimates were over the last week (domain/estimate_accuracy.py); None while no
    # estimate of the tier has been checked (or nothing checks them): the estimate is then shown alone.
    accuracy: TierAccuracy | None = None

    @property
    def range(self) -> tuple[float, float] | None:
        """The range around `start_in` the tier's past errors give (seconds from the tick); None without a
        number, without accuracy figures, or when the tier's estimates were poor."""
        a = self.accuracy
        if self.start_in is None or a is None or a.poor:
            return None
        return a.range_of(self.start_in)

    @property
    def text(self) -> str:
        """Return the estimate as people read it: "estimate: starts in about 8m (from ...)", with the
        range and the tier's record when its estimates were checked ("estimate: starts in 20m-45m
        (...); estimates for this tier were within ±50 % for 7 in 10 workloads last week"); "no
        estimate: ..." (when the tier's estimates were poor, that instead of a number) or, for work
        that can never start, "never: can never start as configured: ..."."""
        if self.never:
            return f"never: {self.basis}"
        if self.start_in is None:
            return f"no estimate: {self.basis}"
        a = self.accuracy
        if a is not None and a.poor:
            return f"no estimate: {a.words}"
        r = self.range
        if a is None or r is None:
            return f"estimate: starts in about {_spoken(self.start_in)} ({self.basis})"
        return f"estimate: starts in {range_words(*r)} ({self.basis}); {a.words}"


@dataclass(frozen=True, slots=True)
class TierWaits:
    """Each tier's recent waits (seconds, ascending) as of one tick, and how they are read."""

    at: float
    window: float
    min_samples: int
    waits: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    accuracy: Mapping[str, TierAccuracy] = field(default_factory=dict)  # per tier, the last week's

    def estimate(self, w: WorkloadStatus) -> StartEstimate | None:
        """Return the start estimate of a waiting workload; None for one that does not wait."""
        state = w.state
        if state is WorkloadState.RUNNING:
            return None
        facts = w.facts
        if facts.never is not None:
            # Waiting longer will not help: no estimate from anyone's waits.
            position = w.ahead - w.ahead_higher_tier + 1 if facts.scheduler_queued else None
            return StartEstimate(position, None, None, 0, facts.never.text, never=True)
        k = facts.kueue
        if facts.source == SOURCE_KUEUE and k is not None and not k.admitted:  # position_queue "kueue"
            # Not in the scheduler's queue: pods' times to schedule say nothing of when Kueue admits it.
            where = f"ClusterQueue {k.cluster_queue}" if k.cluster_queue else "its ClusterQueue"
            place = (
                f"#{k.position + 1} in {where}"
                if k.position is not None
                else f"its place in {where} not known"
            )
            return StartEstimate(
                None, None, None, 0, f"held by Kueue ({place}): it starts once Kueue admits it"
            )
        position = w.ahead - w.ahead_higher_tier + 1 if facts.scheduler_queued else None
        if state is WorkloadState.QUOTA_BLOCKED:
            return StartEstimate(position, None, None, 0, "refused by quota: it starts once quota frees")
        if state is WorkloadState.GATED:
            return StartEstimate(position, None, None, 0, "held by scheduling gates: not queued yet")
        tier, waited = w.tier, w.wait_seconds
        span = _window_words(self.window)
        waits = self.waits.get(tier, ())
        if not waits:
            return StartEstimate(position, None, None, 0, f"no {tier} pods scheduled in the last {span}")
        longer = waits[bisect_right(waits, waited) :]
        n = len(longer)
        if n < self.min_samples:
            return StartEstimate(
                position,
                None,
                None,
                n,
                f"only {n} of {len(waits)} {tier} pods scheduled in the last {span} waited longer than "
                f"its {_spoken(waited)} (at least {self.min_samples} needed)",
            )
        median = _median(longer)
        left = max(0.0, median - waited)
        longer_words = f" that waited longer than its {_spoken(waited)}" if n < len(waits) else ""
        basis = f"from {n} {tier} pods scheduled in the last {span}{longer_words}: median {_spoken(median)}"
        return StartEstimate(position, left, self.at + left, n, basis, accuracy=self.accuracy.get(tier))

    def start_at(self, f: WorkloadFacts) -> float | None:
        """Return the start the estimate of a workload with these facts says (`estimate(w).at`), without its
        words or position: None wherever `estimate` gives no number. Asked of the facts alone, so that the
        estimate recorder needs no workload's status."""
        if not from_waits(f):
            return None
        waited = f.wait_at(self.at)
        waits = self.waits.get(f.tier, ())
        i = bisect_right(waits, waited)
        n = len(waits) - i
        if n < self.min_samples or n == 0:
            return None
        mid = i + n // 2  # the median of waits[i:], without copying it
        median = waits[mid] if n % 2 else (waits[mid - 1] + waits[mid]) / 2
        return self.at + max(0.0, median - waited)


def from_waits(f: WorkloadFacts) -> bool:
    """Whether the estimate of a workload with these facts is read from its tier's waits (so it has a
    number once there are enough of them): not for running, gated, quota-refused, never-startable work or
    a job Kueue has not admitted, whose estimates change only when their facts do."""
    if f.state is not WorkloadState.PENDING and f.state is not WorkloadState.PARTIAL:
        return False
    k = f.kueue
    return f.never is None and not (f.source == SOURCE_KUEUE and k is not None and not k.admitted)


def _median(xs: tuple[float, ...]) -> float:
    n = len(xs)
    mid = n // 2
    return xs[mid] if n % 2 else (xs[mid - 1] + xs[mid]) / 2


@dataclass(slots=True)
class ScheduleHistory:
    """Recent time-to-schedule per tier and the last binding per scheduler, fed one scheduled pod at a time."""

    window: float = 6 * 3600.0
    min_samples: int = 5
    # The newest waits kept per tier: a tick sorts them all, and a busy cluster binds 100,000 pods in 6 h.
    max_samples: int = 5000
    _by_tier: dict[str, deque[tuple[float, float]]] = field(default_factory=dict)  # (at, wait), by `at`
    last_bound: dict[str, float] = field(default_factory=dict)  # scheduler ("" default) → last binding
    # How good each tier's estimates were over the last week: set by the estimate recorder
    # (services/estimate_record.py), read into every tick's `TierWaits`.
    accuracy: Mapping[str, TierAccuracy] = field(default_factory=dict)

    def record(self, tier: str, *, at: float, wait: float, scheduler: str = "") -> None:
        q = self._by_tier.get(tier)
        if q is None:
            q = self._by_tier[tier] = deque(maxlen=self.max_samples)
        if q and at < q[-1][0]:
            # Out of order (a re-list replays): keep the deque sorted by time so pruning stays a popleft.
            items = sorted([*q, (at, wait)])
            q.clear()
            q.extend(items)
        else:
            q.append((at, wait))
        if at > self.last_bound.get(scheduler, float("-inf")):
            self.last_bound[scheduler] = at

    def waits(self, now: float) -> TierWaits:
        """Return the tiers' waits within the window up to `now`, sorted; older ones are forgotten."""
        horizon = now - self.window
        out: dict[str, tuple[float, ...]] = {}
        for tier, q in self._by_tier.items():
            while q and q[0][0] < horizon:
                q.popleft()
            out[tier] = tuple(sorted(w for t, w in q if t <= now))
        return TierWaits(now, self.window, self.min_samples, out, self.accuracy)

    def seed(self, pods: Iterable[Pod], *, tier_of: Callable[[Pod], str], now: float) -> None:
        """Take the waits of pods already scheduled within the window when first listed (or in a dump).

        The watch reports only bindings it sees happen; without this, estimates after a restart would wait
        hours for history. Called once per picture: a pod bound before the list never binds again.
        """
        horizon = now - self.window
        seen = sorted(
            ((at, p) for p in pods if (at := p.scheduled_at) is not None and horizon <= at <= now),
            key=lambda x: x[0],
        )
        for at, p in seen:
            self.record(tier_of(p), at=at, wait=max(0.0, at - p.created), scheduler=p.scheduler)
