"""How good the start estimates were: each estimate given checked against the start that followed, and a
window of those errors per tier turned into the figures shown beside a new estimate.

One estimate is kept per wait (per episode of the fairness history): the first one given with a number.
That is the one a person waiting reads first and plans by, it answers the question asked most ("when
will my job start?") from the furthest away, and it keeps the store at one row per wait. Later
estimates of the same wait are conditional on a longer wait so far and closer to the start: counting
them too would flatter the figure with the easy cases and weigh long waits more than short ones.

For a wait whose estimate was given at `given_at`, that said it would start at `estimated_start`, and
that started at `started`:

- signed error = estimated_start - started (positive: it started earlier than said);
- relative error = signed error / the actual wait from the estimate (started - given_at), the part of
  the wait the estimate spoke of; "within ±50 %" is |relative error| <= 0.5;
- ratio = actual wait / estimated wait (both from `given_at`): the 20th and 80th percentiles of a tier's
  ratios, applied to a new estimate, are the range shown around it ("starts in 20-45 min").

Waits shorter than `FLOOR` seconds count as `FLOOR` in the divisions: a start within the same tick as
the estimate would otherwise divide by zero, and a minute is the figure's resolution (ticks are seconds
apart, people read minutes).

A tier's estimates are "poor" when fewer than `MIN_CHECKED` were checked in the window (too few to say
anything of them) or when fewer than `MIN_SHARE_WITHIN` of them were within ±50 %: then the page, `why`
and the report say so instead of giving a number.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .timefmt import format_duration

WITHIN = 0.5  # "within ±50 %": |relative error| at most this
FLOOR = 60.0  # seconds: shorter waits count as this long in the divisions (see the docstring)
MIN_CHECKED = 10  # fewer checked estimates than this in the window: "poor", too few to tell
MIN_SHARE_WITHIN = 0.5  # a smaller share within ±50 % than this: "poor"
RANGE_LOW, RANGE_HIGH = 0.2, 0.8  # the percentiles of actual/estimated that make the range shown

OUTCOME_WAITING = "waiting"
OUTCOME_STARTED = "started"
OUTCOME_GONE = "gone"  # deleted while waiting, or requeued before a tick saw it start: nothing to check


@dataclass(frozen=True, slots=True)
class GivenEstimate:
    """The first estimate with a number given for one wait, and, once known, when the work started.

    The field order is the store's column order (migration 7, adapters/history/estimate_rows.py)."""

    key: str  # the wait's episode key (fairness history's `episode_key`): one estimate per wait
    namespace: str
    workload: str  # "Kind/name"
    tier: str
    waiting_since: float  # when the wait began
    given_at: float  # the tick that gave the estimate
    estimated_start: float  # when it said the work would start
    started: float | None = None  # the tick that saw it start; None while waiting (or gone)
    outcome: str = OUTCOME_WAITING

    def error(self) -> EstimateError | None:
        """Return the estimate's error once the work started; None while it waits or when it went away."""
        if self.started is None or self.outcome != OUTCOME_STARTED:
            return None
        actual = max(self.started - self.given_at, FLOOR)
        estimated = max(self.estimated_start - self.given_at, FLOOR)
        signed = self.estimated_start - self.started
        return EstimateError(self.tier, self.started, signed, signed / actual, actual / estimated)


@dataclass(frozen=True, slots=True)
class EstimateError:
    tier: str
    started: float
    signed: float  # seconds: estimated start - actual start
    relative: float  # signed / actual wait from the estimate (FLOOR at least)
    ratio: float  # actual wait / estimated wait, both from the estimate (FLOOR at least)


def _quantile(xs: Sequence[float], q: float) -> float:
    """The q-quantile of ascending `xs` by linear interpolation between closest ranks (numpy's default)."""
    pos = q * (len(xs) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (pos - lo)


@dataclass(frozen=True, slots=True)
class TierAccuracy:
    """A tier's checked estimates over a window, as shown beside a new estimate and in the weekly report."""

    tier: str
    n: int  # estimates checked (their work started within the window)
    within: int  # of those, within ±50 %
    median_abs_relative: float  # the median |relative error|
    ratio_low: float  # the RANGE_LOW percentile of actual/estimated
    ratio_high: float  # the RANGE_HIGH percentile

    @property
    def share_within(self) -> float:
        return self.within / self.n if self.n else 0.0

    @property
    def poor(self) -> bool:
        return self.n < MIN_CHECKED or self.share_within < MIN_SHARE_WITHIN

    @property
    def verdict(self) -> str:
        return "poor" if self.poor else "fair"

    def in_ten(self) -> int:
        """The share within ±50 % as "7 in 10" reads it (rounded half up to a tenth)."""
        return math.floor(self.share_within * 10 + 0.5)

    def range_of(self, start_in: float) -> tuple[float, float]:
        """Return the range (seconds from now) to show around an estimate of `start_in` seconds."""
        base = max(start_in, FLOOR)
        return self.ratio_low * base, self.ratio_high * base

    @property
    def words(self) -> str:
        """The figure in a sentence: "estimates for this tier were within ±50 % for 7 in 10 workloads
        last week", or why they are not worth a number."""
        if self.n < MIN_CHECKED:
            return (
                f"estimates for this tier are not shown: only {self.n} checked last week "
                f"(at least {MIN_CHECKED} needed to tell how good they are)"
            )
        if self.poor:
            return (
                f"estimates for this tier were poor last week: within ±50 % for only {self.within} "
                f"of {self.n} workloads"
            )
        return f"estimates for this tier were within ±50 % for {self.in_ten()} in 10 workloads last week"

    @property
    def report_line(self) -> str:
        """One line of the weekly report: n, the share within ±50 %, the median error."""
        verdict = " (poor)" if self.poor else ""
        return (
            f"{self.tier}: {self.n} estimates checked, {round(100 * self.share_within)} % within ±50 %, "
            f"median error {round(100 * self.median_abs_relative)} %{verdict}"
        )


def accuracy(errors: Iterable[EstimateError]) -> dict[str, TierAccuracy]:
    """Return each tier's figures from a window of errors (tiers without any are left out)."""
    by_tier: dict[str, list[EstimateError]] = {}
    for e in errors:
        by_tier.setdefault(e.tier, []).append(e)
    out: dict[str, TierAccuracy] = {}
    for tier, es in sorted(by_tier.items()):
        rel = sorted(abs(e.relative) for e in es)
        ratios = sorted(e.ratio for e in es)
        out[tier] = TierAccuracy(
            tier=tier,
            n=len(es),
            within=sum(1 for r in rel if r <= WITHIN),
            median_abs_relative=_quantile(rel, 0.5),
            ratio_low=_quantile(ratios, RANGE_LOW),
            ratio_high=_quantile(ratios, RANGE_HIGH),
        )
    return out


def errors_of(given: Iterable[GivenEstimate]) -> list[EstimateError]:
    return [e for g in given if (e := g.error()) is not None]


def range_words(low: float, high: float) -> str:
    """ "20m-45m" (the same unit's words as the estimate's: timefmt's spoken durations)."""
    lo, hi = format_duration(low, spoken=True), format_duration(high, spoken=True)
    return lo if lo == hi else f"{lo}-{hi}"
