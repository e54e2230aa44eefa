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

from ..store.migrations import migrate_sqlite
from .estimate_rows import SqlEstimateHistory, estimate_statements
from .replay_rows import SqlReplayHistory, replay_statements
from .rows import statements

log = logging.getLogger(__name__)


class SQLiteFairnessHistory(SqlReplayHistory, SqlEstimateHistory):
    _sql = statements("?")
    _replay_sql = replay_statements("?")
    _estimate_sql = estimate_statements("?")

    def __init__(self, path: str | Path, *, sync_each_commit: bool = True) -> None:
        """`sync_each_commit` False: commits do not wait for the disk (synchronous=NORMAL under WAL; a
        power cut may lose the last commits, a crash of the process loses none). For a writer whose
        history can be made again, as the demo's simulated past week: one commit per simulated tick
        waited for the disk about a tenth of that week's recording (1 s of 9.2 s a simulated
        day, measured 2026-12-03)."""
        self.path = str(path)
        self._lock = threading.RLock()
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        if not sync_each_commit:
            self.db.execute("PRAGMA synchronous=NORMAL")
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
