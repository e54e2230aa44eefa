"""How fresh the cluster source's picture is, as one typed value every reader shares.

The Kubernetes adapter and the simulator both report a `SourceHealth`; readiness, the metrics, the status
page and the Kubernetes-unreachable alert all read this one value instead of parsing a dict each.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

Scalar = str | int | float | bool | None


@dataclass(frozen=True, slots=True)
class KindFreshness:
    """One watched kind: restarts of its feed, how long it may have missed changes, and what the source
    adds for people (resource version, last error, ...), shown as is in /readyz."""

    restarts: int = 0
    stale_seconds: float | None = None
    detail: Mapping[str, Scalar] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class SourceHealth:
    healthy: bool = True
    stale_seconds: float | None = None  # overall: the stalest kind; None when the source cannot tell
    kinds: Mapping[str, KindFreshness] = field(default_factory=dict)
    detail: Mapping[str, Scalar] = field(default_factory=dict)  # source-wide extras (simulated time, ...)
    down_since: float | None = None  # since when some kind cannot reach the cluster; None: all reach it
    last_error: str = ""  # the latest error of a kind that cannot reach it, as the source words it

    def staleness(self) -> float | None:
        """Return how stale the picture may be overall: the source's figure, else its stalest kind's."""
        if self.stale_seconds is not None:
            return self.stale_seconds
        per_kind = [k.stale_seconds for k in self.kinds.values() if k.stale_seconds is not None]
        return max(per_kind) if per_kind else None


HEALTHY = SourceHealth()
