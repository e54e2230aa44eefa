"""The queue as JSON bytes, built per evaluation as requests ask for them and shared until the next one.

A workload's JSON (with its start estimate) is made the first time a response needs it and kept for the
tick: the default page needs 100 of 40,000, and making all of them once a tick (a second and more at
150,000 pods, in a worker thread that under the GIL slowed every request) served rows nobody asked for.
A response joins the pieces of the rows that pass its filters; a body is kept per query for the tick.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson

from watchtower.domain.estimate import TierWaits
from watchtower.domain.queue import WAITING_STATES, WorkloadState, WorkloadStatus
from watchtower.domain.stuck import StuckHead
from watchtower.domain.tick import Tick
from watchtower.domain.tiers import TierPolicy
from watchtower.services.queue_json import (
    SCHEMA_VERSION,
    preemption_dict,
    quota_dict,
    rfc3339,
    workload_dict,
)

DEFAULT_LIMIT = 100  # a workload is ~1.3 KB of JSON: pages keep answers small (20,000 would be 27 MB)
MAX_LIMIT = 100_000
CACHED_BODIES = 64
# An enum member's `.value` is a descriptor call (~1 µs; a tick of 40,000 rows spent most of its build there).
_STATE_VALUE = {s: s.value for s in WorkloadState}


class Row:
    """One workload of a tick: what the filters read, and its JSON made when first asked for (by any
    thread: two making it at once make the same, and either is kept)."""

    __slots__ = (
        "_doc",
        "_json",
        "_stuck",
        "_waits",
        "kind",
        "name",
        "namespace",
        "state",
        "status",
        "team",
        "tier",
    )

    def __init__(self, w: WorkloadStatus, waits: TierWaits | None, stuck: StuckHead | None) -> None:
        # Read from the facts directly, not through the status' properties: 40,000 rows a tick.
        f = w.facts
        k = f.key
        self.status = w
        self.tier = f.tier
        self.namespace = k.namespace
        self.team = f.team
        self.state = _STATE_VALUE[f.state]
        self.name = k.name
        self.kind = k.kind
        self._waits = waits
        self._stuck = stuck
        self._doc: dict[str, Any] | None = None
        self._json: bytes | None = None

    @property
    def doc(self) -> dict[str, Any]:
        d = self._doc
        if d is None:
            w, waits = self.status, self._waits
            d = self._doc = workload_dict(w, waits.estimate(w) if waits is not None else None, self._stuck)
        return d

    @property
    def json(self) -> bytes:
        j = self._json
        if j is None:
            j = self._json = orjson.dumps(self.doc)
        return j


class QueueDocuments:
    """One tick's workloads in display order (tier, waiting first, longest wait), with their JSON as asked
    for, and its preemptions and quotas as the API shows them: shared by every request of the tick."""

    def __init__(self, tick: Tick, tiers: TierPolicy) -> None:
        self.tick = tick
        snap = tick.snapshot
        rank = {t.name: tiers.rank(t.name) for t in tiers.tiers}
        unknown = len(rank)
        order = sorted(
            snap.workloads,
            key=lambda w: (
                rank.get((f := w.facts).tier, unknown),
                f.state not in WAITING_STATES,
                -w.wait_seconds,
                f.key.namespace,
                f.key.name,
            ),
        )
        self._order: tuple[WorkloadStatus, ...] = tuple(order)
        self._waits = tick.waits
        self._stuck = {s.status.key: s for s in tick.stuck}
        # Rows are made as they are read (a page, a lookup): most ticks most are never read.
        self._row_at: list[Row | None] = [None] * len(order)
        self._all: tuple[Row, ...] | None = None
        self._by_name: dict[tuple[str, str], list[int]] | None = None
        self.at = rfc3339(snap.at)
        self.preemptions: tuple[dict[str, Any], ...] = tuple(
            preemption_dict(p, tiers) for p in snap.preemptions
        )
        self.quota: tuple[dict[str, Any], ...] = tuple(quota_dict(q) for q in tick.quota)
        # The forms' sections (Volcano Queues, DRA problems, ClusterQueues, ...), presented at the tick: the
        # body ends with them, in the registry's order, whatever forms it holds.
        self.sections: dict[str, Any] = dict(tick.form_sections)
        self._sections_json = b"".join(
            b"," + orjson.dumps(key) + b":" + orjson.dumps(value) for key, value in self.sections.items()
        )
        # Dashboards and scripts repeat the same few queries until the next evaluation.
        self._bodies: dict[
            tuple[frozenset[str], frozenset[str], frozenset[str], frozenset[str], int, int], bytes
        ] = {}

    def _row(self, i: int) -> Row:
        r = self._row_at[i]
        if r is None:
            w = self._order[i]
            r = self._row_at[i] = Row(w, self._waits, self._stuck.get(w.facts.key))
        return r

    @property
    def rows(self) -> tuple[Row, ...]:
        """Every row in display order (the status page counts them)."""
        rows = self._all
        if rows is None:
            rows = self._all = tuple(self._row(i) for i in range(len(self._order)))
        return rows

    def find(self, namespace: str, name: str) -> list[Row]:
        by_name = self._by_name
        if by_name is None:
            by_name = {}
            for i, w in enumerate(self._order):
                k = w.facts.key
                by_name.setdefault((k.namespace, k.name), []).append(i)
            self._by_name = by_name
        return [self._row(i) for i in by_name.get((namespace, name), ())]

    def queue_json(
        self,
        *,
        tiers: frozenset[str] = frozenset(),
        namespaces: frozenset[str] = frozenset(),
        teams: frozenset[str] = frozenset(),
        states: frozenset[str] = frozenset(),
        offset: int = 0,
        limit: int = DEFAULT_LIMIT,
    ) -> bytes:
        """Return the /api/v1/queue body for these filters (an empty filter restricts nothing)."""
        key = (tiers, namespaces, teams, states, offset, limit)
        body = self._bodies.get(key)
        if body is not None:
            return body
        order = self._order
        picked: range | list[int]
        if tiers or namespaces or teams or states:
            picked = [
                i
                for i, f in enumerate([w.facts for w in order])
                if (not tiers or f.tier in tiers)
                and (not namespaces or f.key.namespace in namespaces)
                and (not teams or f.team in teams)
                and (not states or _STATE_VALUE[f.state] in states)
            ]
        else:
            picked = range(len(order))
        page = [self._row(i).json for i in picked[offset : offset + limit]]
        head = orjson.dumps(
            {
                "schema_version": SCHEMA_VERSION,
                "at": self.at,
                "total": len(picked),
                "offset": offset,
                "count": len(page),
            }
        )
        body = head[:-1] + b',"workloads":[' + b",".join(page) + b"]" + self._sections_json + b"}"
        if len(self._bodies) >= CACHED_BODIES:
            self._bodies.pop(next(iter(self._bodies)))
        self._bodies[key] = body
        return body


class DocumentCache:
    """Holds the documents of the latest tick; a new tick replaces them once they are built.

    Building (the display order; rows and their JSON come as asked for) takes tens of ms at 40,000
    workloads. While one request (or the prebuild after a tick) builds the new documents, other requests are answered from the previous tick instead of queueing.
    """

    def __init__(self, tiers: TierPolicy) -> None:
        self.tiers = tiers
        self._current: QueueDocuments | None = None
        self._lock = threading.Lock()

    @property
    def current(self) -> QueueDocuments | None:
        return self._current

    def for_tick(self, tick: Tick) -> QueueDocuments:
        cur = self._current
        if cur is not None and cur.tick is tick:
            return cur
        if not self._lock.acquire(blocking=cur is None):
            assert cur is not None
            return cur
        try:
            cur = self._current
            if cur is None or cur.tick is not tick:
                cur = self._current = QueueDocuments(tick, self.tiers)
            return cur
        finally:
            self._lock.release()

    async def prebuild(self, tick: Tick) -> None:
        """Build a new tick's documents, and the default page most requests ask for, off the event loop
        before the first request wants them."""
        await asyncio.to_thread(lambda: self.for_tick(tick).queue_json())
