"""How fresh the picture of each kind is: for /readyz, the status page and the metrics."""

from __future__ import annotations

from dataclasses import dataclass

from watchtower.domain.health import KindFreshness, Scalar, SourceHealth


@dataclass
class KindHealth:
    kind: str
    resource_version: str = ""
    synced: bool = False  # listed at least once
    connected: bool = False  # a watch stream is open: changes arrive as they happen
    present: bool = True  # False: an optional CRD that is not installed
    last_contact: float | None = None  # last list or watch bytes received
    watch_restarts: int = 0  # watches opened again after the first
    relists: int = 0  # full LISTs after the first (410 Gone)
    bad_lines: int = 0  # watch lines that could not be read: skipped
    consecutive_failures: int = 0
    last_error: str = ""
    last_error_at: float | None = None
    down_since: float | None = None  # the first failure of the current outage; None while reachable
    next_retry_at: float | None = None  # when the back-off tries again
    # The last outage that ended (unreachable, or a watch that went silent): since when the picture may
    # have missed changes, how long, and why; it stays in /readyz so a short one is still seen afterwards.
    last_outage_since: float | None = None
    last_outage_seconds: float | None = None
    last_outage_error: str = ""

    def contact(self, now: float) -> None:
        self.last_contact = now

    def failed(self, now: float, error: str, *, retry_in: float, since: float | None = None) -> bool:
        """Record a failed attempt; return True when it starts an outage (the first since the last success).

        `since`: when the outage really began, if before `now` (a watch found silent was stale since its
        last byte).
        """
        self.connected = False
        self.consecutive_failures += 1
        self.last_error = error[:300]
        self.last_error_at = now
        self.next_retry_at = now + retry_in
        if self.down_since is not None:
            return False
        self.down_since = now if since is None else min(since, now)
        return True

    def recovered(self, now: float) -> float | None:
        """Record a success; return how long the outage it ends lasted, or None when there was none."""
        self.consecutive_failures = 0
        self.next_retry_at = None
        since, self.down_since = self.down_since, None
        if since is None:
            return None
        self.last_outage_since, self.last_outage_seconds = since, max(0.0, now - since)
        self.last_outage_error = self.last_error
        return self.last_outage_seconds

    def stale_seconds(self, now: float, started: float) -> float:
        """Return how long this kind's picture may have missed changes: 0 while a watch is open."""
        if not self.present or (self.connected and self.synced):
            return 0.0
        since = self.last_contact if self.last_contact is not None else started
        return max(0.0, now - since)

    def as_dict(self, now: float, started: float) -> dict[str, Scalar]:
        return {
            "resource_version": self.resource_version,
            "synced": self.synced,
            "connected": self.connected,
            "present": self.present,
            "last_contact": self.last_contact,
            "stale_seconds": round(self.stale_seconds(now, started), 3),
            "restarts": self.watch_restarts + self.relists,
            "watch_restarts": self.watch_restarts,
            "relists": self.relists,
            "bad_lines": self.bad_lines,
            "consecutive_failures": self.consecutive_failures,
            "last_error": self.last_error,
            "last_error_at": self.last_error_at,
            "down_since": self.down_since,
            "last_outage_since": self.last_outage_since,
            "last_outage_seconds": None
            if self.last_outage_seconds is None
            else round(self.last_outage_seconds, 3),
            "last_outage_error": self.last_outage_error,
            "next_retry_in_seconds": None
            if self.next_retry_at is None
            else round(max(0.0, self.next_retry_at - now), 3),
        }


def source_health(
    kinds: dict[str, KindHealth], *, now: float, started: float, stale_limit: float
) -> SourceHealth:
    """Return the overall health (the port's `feed_health`): healthy when every kind is listed and none is
    staler than the limit, with each kind's figures for /readyz."""
    stale_of = {k: h.stale_seconds(now, started) for k, h in kinds.items()}
    stale = max(stale_of.values(), default=0.0)
    synced = all(h.synced or not h.present for h in kinds.values())
    healthy = synced and stale <= stale_limit
    down = [h for h in kinds.values() if h.present and h.down_since is not None]
    latest = max(down, key=lambda h: h.last_error_at or 0.0, default=None)
    return SourceHealth(
        healthy=healthy,
        stale_seconds=round(stale, 3),
        down_since=min((h.down_since for h in down if h.down_since is not None), default=None),
        last_error=latest.last_error if latest is not None else "",
        kinds={
            k: KindFreshness(
                restarts=h.watch_restarts + h.relists,
                stale_seconds=round(stale_of[k], 3),
                detail=h.as_dict(now, started),
            )
            for k, h in kinds.items()
        },
        detail={
            "healthy": healthy,
            "synced": synced,
            "stale_seconds": round(stale, 3),
            "watch_restarts": sum(h.watch_restarts for h in kinds.values()),
            "relists": sum(h.relists for h in kinds.values()),
            "bad_lines": sum(h.bad_lines for h in kinds.values()),
        },
    )


def summary(
    kinds: dict[str, KindHealth], *, now: float, started: float, stale_limit: float
) -> dict[str, object]:
    """Return `source_health` as one JSON-ready dict (the adapter's own report, for people and tests)."""
    h = source_health(kinds, now=now, started=started, stale_limit=stale_limit)
    return {**h.detail, "kinds": {k: dict(f.detail) for k, f in h.kinds.items()}}
