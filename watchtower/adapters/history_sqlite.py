"""The fairness history in SQLite: wait episodes, preemptions, incidents and the heartbeat minutes, in the
same database file as the alert store (its own connection; WAL lets the two write in turn). Its tables are
the store's migration 4: opening the history migrates the file as opening the alert store does.

Every write is an upsert by the record's key, so recording the same tick twice, from a restarted process or
from a second replica, leaves the same rows. A closed record stays closed: a later write of it still open
(a replica a tick behind) changes nothing, and of two closings the earlier one is kept.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from watchtower.domain.fairness.history import Incident, PreemptionRecord, WaitEpisode

from . import history_rows
from .store_migrations import migrate_sqlite

log = logging.getLogger(__name__)
_SQL = history_rows.statements("?")


class SQLiteFairnessHistory:
    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA busy_timeout=5000")
        with self._tx() as db:
            self.schema_version = migrate_sqlite(db, where=self.path, log=log.info)

    def close(self) -> None:
        with self._lock:
            self.db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self.db.execute("BEGIN IMMEDIATE")
            try:
                yield self.db
                self.db.execute("COMMIT")
            except BaseException:
                self.db.execute("ROLLBACK")
                raise

    def _rows(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
            return self.db.execute(sql, tuple(args)).fetchall()

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
            db.executemany(_SQL.upsert_episode, got.episodes)
            db.executemany(_SQL.upsert_preemption, got.preemptions)
            db.executemany(_SQL.upsert_incident, got.incidents)
            db.executemany(_SQL.heartbeat, got.heartbeats)

    def episodes(self, start: float, end: float) -> list[WaitEpisode]:
        rows = self._rows(_SQL.episodes, (end, start))
        return [WaitEpisode(*r) for r in rows]

    def preemptions(self, start: float, end: float) -> list[PreemptionRecord]:
        rows = self._rows(_SQL.preemptions, (start, end))
        return [PreemptionRecord(*r) for r in rows]

    def incidents(self, start: float, end: float) -> list[Incident]:
        rows = self._rows(_SQL.incidents, (end, start))
        return [Incident(*r) for r in rows]

    def open_waits(self) -> tuple[list[WaitEpisode], list[Incident]]:
        """Return the episodes and incidents still open, for a restarted recorder to start from."""
        eps = self._rows(_SQL.open_episodes)
        inc = self._rows(_SQL.open_incidents)
        return [WaitEpisode(*r) for r in eps], [Incident(*r) for r in inc]

    def history_coverage(self, start: float, end: float) -> float:
        ((n,),) = self._rows(_SQL.coverage, (start, end))
        return history_rows.coverage_hours(n, start, end)

    def prune_history(self, before: float) -> int:
        with self._tx() as db:
            n = 0
            for sql in _SQL.prune:
                n += db.execute(sql, (before,)).rowcount
            return n
