"""What the watch loop knows of each kind's feed (listed, changes seen) and, with the source's health, readiness."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from watchtower.domain.health import SourceHealth


@dataclass(slots=True)
class KindFeed:
    listed_at: float | None = None
    listed_objects: int = 0
    last_change: float | None = None
    changes: int = 0


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    problems: tuple[str, ...]
    detail: dict[str, Any] = field(default_factory=dict)


class FeedTracker:
    """Per watched kind: when it was last listed, how many objects, how many changes since."""

    def __init__(self, kinds: Iterable[str]) -> None:
        self.kinds = tuple(kinds)
        self.feeds: dict[str, KindFeed] = {k: KindFeed() for k in self.kinds}

    def listed_page(self, kind: str, count: int, *, first: bool) -> None:
        feed = self.feeds.setdefault(kind, KindFeed())
        feed.listed_objects = count if first else feed.listed_objects + count

    def listed(self, kind: str, now: float) -> bool:
        """Record that a whole list of `kind` arrived; return True if that completed the first full picture."""
        feed = self.feeds.setdefault(kind, KindFeed())
        initial = feed.listed_at is None
        feed.listed_at = now
        return initial and self.listed_all()

    def changed(self, kind: str, now: float) -> None:
        feed = self.feeds.setdefault(kind, KindFeed())
        feed.last_change = now
        feed.changes += 1

    def listed_all(self) -> bool:
        return all(self.feeds[k].listed_at is not None for k in self.kinds)

    def readiness(
        self,
        health: SourceHealth,
        *,
        now: float,
        stale_after: float,
        evaluated_at: float | None,
        skipped: Mapping[str, int],
    ) -> Readiness:
        """Return whether the picture is complete and fresh, with per-kind detail saying how stale."""
        problems: list[str] = []
        kinds: dict[str, Any] = {}
        for kind in self.kinds:
            f = self.feeds.get(kind, KindFeed())
            src = health.kinds.get(kind)
            stale = src.stale_seconds if src is not None else None
            info: dict[str, Any] = {
                "listed": f.listed_at is not None,
                "objects_at_list": f.listed_objects,
                "changes": f.changes,
                "seconds_since_change": round(now - f.last_change, 3) if f.last_change is not None else None,
                "stale_seconds": stale,
                "restarts": src.restarts if src is not None else 0,
            }
            if src is not None:
                info["source"] = dict(src.detail)
            kinds[kind] = info
            if f.listed_at is None:
                problems.append(f"{kind}: not listed yet")
            if stale is not None and stale > stale_after:
                problems.append(f"{kind}: no contact with the API server for {stale:.0f}s")
        if not health.healthy:
            problems.append("the cluster source reports itself unhealthy")
        overall = health.staleness()
        if overall is not None and overall > stale_after:
            problems.append(f"picture is {overall:.0f}s stale (limit {stale_after:.0f}s)")
        detail: dict[str, Any] = {
            "stale_seconds": overall,
            "stale_after_seconds": stale_after,
            "evaluated_at": evaluated_at,
            "skipped_objects": dict(skipped),
            "kinds": kinds,
        }
        return Readiness(not problems, tuple(problems), detail)
