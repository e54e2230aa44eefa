"""Aggregation groups: alerts gathered per route and group labels, flushed after `group_wait`, then every
`group_interval` (Alertmanager's dispatcher)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .model import AlertState, TrackedAlert
from .routing import GROUP_BY_ALL, Route


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


@dataclass(frozen=True, slots=True)
class Filing:
    """Where a batch of alerts goes in one group: worked out by `Dispatcher.plan`, filed by `file`."""

    route: Route
    key: str
    firing: dict[str, TrackedAlert]  # fingerprint → alert; these may open the group
    resolved: dict[str, TrackedAlert]  # these only join a group that is there or that `firing` opens


class Dispatcher:
    """Holds the aggregation groups; pure: the caller passes `now` and acts on what `due` returns."""

    def __init__(self, root: Route) -> None:
        self.root = root
        self.groups: dict[str, Group] = {}
        # fingerprint → (route, group key) pairs: the labels are the alert's identity, so where an alert
        # goes never changes, and a storm of 10,000 alerts is re-ingested on every tick.
        self._placement: dict[str, list[tuple[Route, str]]] = {}
        self._kept = 0
        # (route path, its group_by values) → group key: a storm's 10,000 alerts fall in a few groups,
        # and writing the key is most of the cost of placing an alert.
        self._keys: dict[tuple[str | None, ...], str] = {}

    def _group_key(self, r: Route, labels: Mapping[str, str]) -> str:
        if GROUP_BY_ALL in r.group_by:
            return r.group_key(labels)
        ident = (r.path, *(labels.get(k) for k in r.group_by))
        key = self._keys.get(ident)
        if key is None:
            key = self._keys[ident] = r.group_key(labels)
        return key

    def _place(self, a: TrackedAlert) -> list[tuple[Route, str]]:
        hit = self._placement.get(a.fingerprint)
        if hit is None:
            hit = [(r, self._group_key(r, a.labels)) for r in self.root.match(a.labels)]
            self._placement[a.fingerprint] = hit
        return hit

    def plan(self, alerts: Iterable[TrackedAlert]) -> list[Filing]:
        """Work out the groups each firing or resolved alert goes in (pending ones are sent nowhere).

        Reads nothing `due`, `flushed` and `file` change, so a caller may plan a storm's 10,000 alerts in
        another thread while groups are flushed, and then only file them."""
        batch = list(alerts)
        if len(self._placement) > 2 * max(len(batch), self._kept) + 1024:
            # Forget alerts long gone, so the cache stays the size of what is live (an alert still held
            # by a group is placed again if it comes back: only the time is lost).
            live = {a.fingerprint for a in batch}
            self._placement = {fp: p for fp, p in self._placement.items() if fp in live}
            self._kept = len(self._placement)
            if len(self._keys) > 2 * len(self._placement) + 1024:
                self._keys = {}
        out: dict[str, Filing] = {}
        for a in batch:
            if a.state is AlertState.PENDING:
                continue
            for route, key in self._place(a):
                f = out.get(key)
                if f is None:
                    f = out[key] = Filing(route, key, {}, {})
                (f.resolved if a.state is AlertState.RESOLVED else f.firing)[a.fingerprint] = a
        return list(out.values())

    def file(self, filings: Iterable[Filing], *, now: float) -> None:
        """Put planned alerts in their groups, opening a group for firing alerts that have none."""
        for f in filings:
            g = self.groups.get(f.key)
            if g is None:
                if not f.firing:
                    continue  # nothing to say about alerts no group ever held
                first = next(iter(f.firing.values()))
                g = self.groups[f.key] = Group(
                    f.key, f.route, f.route.group_labels(first.labels), now, now + f.route.group_wait
                )
            g.alerts.update(f.firing)
            g.alerts.update(f.resolved)

    def ingest(self, alerts: Iterable[TrackedAlert], *, now: float) -> None:
        """Put each firing or resolved alert in its groups (pending ones are not sent anywhere); a resolved
        alert only joins a group that is there, or that a firing alert of the same batch opens."""
        self.file(self.plan(alerts), now=now)

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
