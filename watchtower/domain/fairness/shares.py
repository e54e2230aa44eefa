"""The fairness arithmetic both the report and the live gauges use: max-min fair shares, Jain's index and
a ratio of figures that may be missing."""

from __future__ import annotations

from collections.abc import Mapping


def max_min_shares(
    capacity: float, demand: Mapping[str, float], weights: Mapping[str, float] | None = None
) -> dict[str, float]:
    """Return each team's max-min fair share of `capacity` over its `demand` (progressive filling): capacity
    is split in proportion to the weights (1 where not given); a team that asks less than its split gets its
    demand and the rest is split again among the others. Shares never exceed demand and add up to
    min(capacity, total demand)."""
    w = {t: (weights or {}).get(t, 1.0) for t in demand}
    share = {t: 0.0 for t in demand}
    open_ = {t for t, d in demand.items() if d > 0 and w[t] > 0}
    left = max(0.0, capacity)
    while open_ and left > 1e-12:
        total_w = sum(w[t] for t in open_)
        level = left / total_w
        # The teams whose remaining demand fits under this round's level are filled; the rest share what is left.
        filled = {t for t in open_ if demand[t] - share[t] <= level * w[t] + 1e-12}
        if not filled:
            for t in open_:
                share[t] += level * w[t]
            break
        for t in filled:
            left -= demand[t] - share[t]
            share[t] = demand[t]
        open_ -= filled
    return share


def satisfaction(used: float, demand: float, fair_share: float) -> float | None:
    """x = min(1, U / min(D, F)); None for a team with no demand (it takes no part in Jain's index)."""
    bound = min(demand, fair_share)
    if demand <= 0 or bound <= 0:
        return None
    return min(1.0, used / bound)


def jain_index(values: Mapping[str, float | None]) -> float | None:
    """(Σx)² / (n·Σx²) over the teams whose x is known; None when there is none or every x is 0."""
    xs = [x for x in values.values() if x is not None]
    sq = sum(x * x for x in xs)
    if not xs or sq == 0:
        return None
    return sum(xs) ** 2 / (len(xs) * sq)


def ratio(a: float | None, b: float | None) -> float | None:
    """a / b; None when either is unknown or b is not positive: a figure without its inputs is None."""
    if a is None or b is None or b <= 0:
        return None
    return a / b
