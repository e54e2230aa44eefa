"""The alert state store in SQLite (WAL): alert states, silences, the notification log and the outbox.

The statements and the logic are the SQL store's (sql.py); this shell holds the file's connection, its
lock and its transactions. Every method is one short transaction, so a crash leaves either the old or the
new state, never half. The store may be used from the event loop and from a worker thread (the alerting
service saves a storm's alerts off the loop); a lock keeps the two from interleaving statements on the one
connection.
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
import threading
from collections.abc import Iterable, Iterator
from pathlib import Path

from watchtower.domain.alerts.outbox import OutboxMessage

from . import migrations
from .rows import message, new_message_row
from .sql import SqlAlertStore, locked, statements

log = logging.getLogger(__name__)


class SQLiteAlertStore(SqlAlertStore):
    _sql = statements("sqlite")

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self._lock = threading.RLock()
        # isolation_level=None: we open transactions ourselves, so each method commits exactly once.
        self.db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # FULL: a message marked delivered stays delivered even if the machine loses power right after.
        self.db.execute("PRAGMA synchronous=FULL")
        self.db.execute("PRAGMA busy_timeout=5000")
        self.schema_version = self._migrate()

    def _migrate(self) -> int:
        with self._tx() as db:
            return migrations.migrate_sqlite(db, where=self.path, log=log.info)

    @locked
    def close(self) -> None:
        self.db.close()

    def _connection(self) -> contextlib.AbstractContextManager[sqlite3.Connection]:
        # Reads run outside any transaction: a reader never takes the write lock another process may hold.
        return contextlib.nullcontext(self.db)

    @contextlib.contextmanager
    def _transaction(self, db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
        # IMMEDIATE: the write lock is taken here, so another process holding it makes us wait (busy_timeout)
        # instead of failing at our first write.
        db.execute("BEGIN IMMEDIATE")
        try:
            yield db
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    @locked
    def due(self, now: float) -> list[OutboxMessage]:
        """Return, per enabled integration, its oldest pending message if its next attempt is due:
        an integration delivers in order, so a message waits for the one before it."""
        rows = self.db.execute(
            "SELECT o.id, o.key, o.integration, o.group_key, o.payload, o.created, o.attempts,"
            " o.next_attempt, o.status, o.last_error, o.delivered_at FROM outbox o JOIN ("
            "  SELECT integration, MIN(id) AS id FROM outbox WHERE status = 'pending' GROUP BY integration"
            ") h ON o.id = h.id"
            " WHERE o.next_attempt <= ?"
            " AND o.integration NOT IN (SELECT integration FROM disabled_integrations)"
            " ORDER BY o.id",
            (now,),
        )
        return [message(r) for r in rows]

    @locked
    def following(self, head: OutboxMessage, now: float, limit: int) -> list[OutboxMessage]:
        """Return up to `limit` pending messages of `head`'s integration after it, in order, as long as
        each is due: what its lane may send next, in one batch with `head`."""
        rows = self.db.execute(self._sql.following, (head.integration, head.id, limit)).fetchall()
        out: list[OutboxMessage] = []
        for r in rows:
            m = message(r)
            if m.next_attempt > now:
                break
            out.append(m)
        return out

    @locked
    def enqueue_once(self, messages: Iterable[OutboxMessage], now: float) -> int:
        """`SqlAlertStore.enqueue_once` in three statements, not two per message: the transaction holds
        the file's write lock (BEGIN IMMEDIATE), so the keys read in it cannot be recorded by another
        process before its inserts; a storm's 10,000 owner notices held the store for seconds."""
        msgs = list(messages)
        if not msgs:
            return 0
        with self._tx() as db:
            stored = {k for (k,) in db.execute("SELECT key FROM sent_once")}
            new: dict[str, OutboxMessage] = {}
            for m in msgs:
                if m.key not in stored:
                    new.setdefault(m.key, m)
            cur = db.cursor()
            cur.executemany(self._sql.record_key, [(k, now) for k in new])
            cur.executemany(self._sql.insert_message, [new_message_row(m) for m in new.values()])
        return len(new)

    @locked
    def recorded(self, keys: Iterable[str]) -> set[str]:
        wanted = set(keys)
        # One read of the table: a week's keys number the recipients, the table a few hundred weeks of them.
        return {k for (k,) in self.db.execute("SELECT key FROM sent_once") if k in wanted}
