"""Aggregation groups: alerts gathered per route and group labels, flushed after `group_wait`, then every
`group_interval` (Alertmanager's dispatcher)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from .model import AlertState, TrackedAlert
from .routing import Route


@dataclass(slots=True)
class Group:
    key: str
    route: Route
    labels: dict[str, str]
    created_at: float
    next_flush: float
    flushed: bool = False
    alerts: dict[str, TrackedAlert] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Flush:
    """A group whose time has come, with the alerts it holds at that moment."""

    key: str
    route: Route
    labels: dict[str, str]
    alerts: tuple[TrackedAlert, ...]


class Dispatcher:
    """Holds the aggregation groups; pure: the caller passes `now` and acts on what `due` returns."""

    def __init__(self, root: Route) -> None:
        self.root = root
        self.groups: dict[str, Group] = {}
        # fingerprint → (route, group key) pairs: the labels are the alert's identity, so where an alert
        # goes never changes, and a storm of 10,000 alerts is re-ingested on every tick.
        self._placement: dict[str, list[tuple[Route, str]]] = {}
        self._kept = 0

    def _place(self, a: TrackedAlert) -> list[tuple[Route, str]]:
        hit = self._placement.get(a.fingerprint)
        if hit is None:
            hit = [(r, r.group_key(a.labels)) for r in self.root.match(a.labels)]
            self._placement[a.fingerprint] = hit
        return hit

    def place(self, alerts: Iterable[TrackedAlert]) -> None:
        """Work out where these alerts go, ahead of `ingest` (which then only files them): lets a caller
        do the costly part of a storm elsewhere than where it ingests."""
        for a in alerts:
            if a.state is not AlertState.PENDING:
                self._place(a)

    def ingest(self, alerts: Iterable[TrackedAlert], *, now: float) -> None:
        """Put each firing or resolved alert in its groups (pending ones are not sent anywhere)."""
        batch = list(alerts)
        if len(self._placement) > 2 * max(len(batch), self._kept) + 1024:
            # Forget alerts long gone, so the cache stays the size of what is live.
            live = {a.fingerprint for a in batch}
            live.update(fp for g in self.groups.values() for fp in g.alerts)
            self._placement = {fp: p for fp, p in self._placement.items() if fp in live}
            self._kept = len(self._placement)
        for a in batch:
            if a.state is AlertState.PENDING:
                continue
            for route, key in self._place(a):
                g = self.groups.get(key)
                if g is None:
                    if a.state is AlertState.RESOLVED:
                        continue  # nothing to say about an alert no group ever held
                    g = self.groups[key] = Group(
                        key, route, route.group_labels(a.labels), now, now + route.group_wait
                    )
                g.alerts[a.fingerprint] = a

    def next_due(self) -> float | None:
        return min((g.next_flush for g in self.groups.values()), default=None)

    def due(self, *, now: float) -> list[Flush]:
        """Return the groups to flush now, oldest deadline first, and schedule their next flush."""
        out = []
        for g in sorted(self.groups.values(), key=lambda g: (g.next_flush, g.key)):
            if g.next_flush > now:
                continue
            g.flushed = True
            g.next_flush = now + g.route.group_interval
            out.append(Flush(g.key, g.route, dict(g.labels), tuple(g.alerts.values())))
        return out

    def flushed(self, flush: Flush) -> None:
        """After a flush was handed on: drop the resolved alerts it carried, and the group if empty."""
        g = self.groups.get(flush.key)
        if g is None:
            return
        for a in flush.alerts:
            cur = g.alerts.get(a.fingerprint)
            # Only if unchanged since: an alert that fired again meanwhile stays.
            if a.state is AlertState.RESOLVED and cur is not None and cur.state is AlertState.RESOLVED:
                del g.alerts[a.fingerprint]
        if not g.alerts:
            del self.groups[flush.key]
