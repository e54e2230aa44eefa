"""Exponential back-off with jitter, so that many watchers do not reconnect in step."""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class Backoff:
    base: float = 0.5
    cap: float = 30.0
    rng: random.Random = field(default_factory=random.Random)
    attempts: int = 0

    def next(self) -> float:
        """Return the next delay: half the exponential step fixed, the other half random."""
        step = min(self.cap, self.base * float(1 << min(self.attempts, 30)))
        self.attempts += 1
        return step / 2 + self.rng.uniform(0, step / 2)

    def reset(self) -> None:
        self.attempts = 0
