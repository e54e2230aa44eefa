"""The fairness history in PostgreSQL, in the alert store's database: the same rows and upserts by key as
the SQLite history (adapters/history_rows.py), so replicas sharing the database record each fact once.

It runs on the alert store's connection (handed in as its `transaction`), which has already migrated the
database to migration 4 and masks the URL's secrets in its errors.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from typing import Any

from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode

from . import history_rows

_SQL = history_rows.statements("%s")

Transaction = Callable[[], contextlib.AbstractContextManager[Any]]


class PostgresFairnessHistory:
    def __init__(self, transaction: Transaction, *, on_close: Callable[[], None] | None = None) -> None:
        self._tx = transaction
        self._on_close = on_close

    def close(self) -> None:
        """Close the store opened for the history alone; a shared store is closed by its owner."""
        if self._on_close is not None:
            self._on_close()

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._tx() as db:
            return list(db.execute(sql, tuple(args)).fetchall())

    def record(
        self,
        episodes: Iterable[WaitEpisode] = (),
        preemptions: Iterable[PreemptionRecord] = (),
        incidents: Iterable[Incident] = (),
        *,
        heartbeats: Iterable[float] = (),
    ) -> None:
        got = history_rows.rows(episodes, preemptions, incidents, heartbeats)
        if not got:
            return
        with self._tx() as db:
            cur = db.cursor()
            for sql, batch in (
                (_SQL.upsert_episode, got.episodes),
                (_SQL.upsert_preemption, got.preemptions),
                (_SQL.upsert_incident, got.incidents),
                (_SQL.heartbeat, got.heartbeats),
            ):
                if batch:
                    cur.executemany(sql, batch)

    def episodes(self, start: float, end: float) -> list[WaitEpisode]:
        return [WaitEpisode(*r) for r in self._rows(_SQL.episodes, (end, start))]

    def preemptions(self, start: float, end: float) -> list[PreemptionRecord]:
        return [PreemptionRecord(*r) for r in self._rows(_SQL.preemptions, (start, end))]

    def incidents(self, start: float, end: float) -> list[Incident]:
        return [Incident(*r) for r in self._rows(_SQL.incidents, (end, start))]

    def open_waits(self) -> tuple[list[WaitEpisode], list[Incident]]:
        eps = self._rows(_SQL.open_episodes)
        inc = self._rows(_SQL.open_incidents)
        return [WaitEpisode(*r) for r in eps], [Incident(*r) for r in inc]

    def history_coverage(self, start: float, end: float) -> float:
        ((n,),) = self._rows(_SQL.coverage, (start, end))
        return history_rows.coverage_hours(int(n), start, end)

    def prune_history(self, before: float) -> int:
        with self._tx() as db:
            return sum(db.execute(sql, (before,)).rowcount for sql in _SQL.prune)
