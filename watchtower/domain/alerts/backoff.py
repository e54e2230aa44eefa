"""How long to wait before the next delivery attempt."""

from __future__ import annotations


def next_delay(
    attempt: int,
    *,
    base: float,
    cap: float,
    jitter: float,
    rnd: float,
    retry_after: float | None = None,
    retry_after_cap: float = 3600.0,
) -> float:
    """Return seconds before attempt `attempt + 1`: exponential from `base`, at most `cap`, spread by
    ±`jitter` (a fraction) using `rnd` in [0, 1), and never sooner than the receiver's Retry-After."""
    exp = base * 2.0 ** max(0, attempt - 1)
    delay = min(cap, exp) * (1.0 + jitter * (2.0 * rnd - 1.0))
    if retry_after is not None:
        # A receiver's Retry-After is honoured, but it cannot park the outbox for days.
        delay = max(delay, min(max(0.0, retry_after), retry_after_cap))
    return max(0.0, delay)
