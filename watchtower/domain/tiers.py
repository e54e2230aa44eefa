"""Priority tiers: which tier a pod belongs to and how long it may wait.

The tiers themselves are configuration (`tiers:`, defaults in config/model.py); this is how they are read."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

# PriorityClass values at or above this are Kubernetes' own (system-cluster-critical, system-node-critical).
SYSTEM_PRIORITY_MIN = 2_000_000_000


@dataclass(frozen=True, slots=True)
class Tier:
    name: str
    min_priority: int
    warn_after: float  # seconds
    critical_after: float  # seconds
    classes: frozenset[str] = frozenset()  # PriorityClass names that belong here whatever their value


@dataclass(frozen=True, slots=True)
class TierPolicy:
    """Tiers ordered from the highest (most urgent) to the lowest."""

    tiers: tuple[Tier, ...]

    @classmethod
    def of(cls, tiers: Iterable[Tier]) -> TierPolicy:
        return cls(tuple(sorted(tiers, key=lambda t: t.min_priority, reverse=True)))

    def tier_of(self, priority: int, priority_class: str = "") -> Tier:
        """Return the tier of a pod: an explicit class listing wins, else the highest tier whose minimum it
        meets; a pod below every minimum falls into the lowest tier."""
        if priority_class:
            for t in self.tiers:
                if priority_class in t.classes:
                    return t
        for t in self.tiers:
            if priority >= t.min_priority:
                return t
        return self.tiers[-1]

    def rank(self, tier_name: str) -> int:
        """Return 0 for the highest tier, 1 for the next, ...; unknown names sort last."""
        for i, t in enumerate(self.tiers):
            if t.name == tier_name:
                return i
        return len(self.tiers)
