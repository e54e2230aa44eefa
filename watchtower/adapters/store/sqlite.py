"""The alert state store in SQLite (WAL): alert states, silences, the notification log and the outbox.

Every method is one short transaction, so a crash leaves either the old or the new state, never half.
The store may be used from the event loop and from a worker thread (the alerting service saves a storm's
alerts off the loop); a lock keeps the two from interleaving statements on the one connection.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

import orjson

from watchtower.domain.alerts.model import TrackedAlert, fingerprint
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import DisabledIntegration, OutboxMessage, PruneResult
from watchtower.domain.alerts.silences import Silence

from . import migrations
from .rows import NOTHING_FIRING, alert, alert_body, message, new_message_row, silence, silence_body

log = logging.getLogger(__name__)

_COLUMNS = (
    "SELECT id, key, integration, group_key, payload, created, attempts, next_attempt, status, last_error,"
    " delivered_at FROM outbox"
)
_NEWEST = _COLUMNS + " ORDER BY id DESC LIMIT ?"
_NEWEST_WITH_STATUS = _COLUMNS + " WHERE status = ? ORDER BY id DESC LIMIT ?"

P = ParamSpec("P")
R = TypeVar("R")


def _locked(
    method: Callable[Concatenate[SQLiteAlertStore, P], R],
) -> Callable[Concatenate[SQLiteAlertStore, P], R]:
    @functools.wraps(method)
    def wrapper(self: SQLiteAlertStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class SQLiteAlertStore:
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

    @_locked
    def close(self) -> None:
        self.db.close()

    @contextlib.contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        """Yield the connection inside one transaction: committed if the block ends, else rolled back."""
        # IMMEDIATE: the write lock is taken here, so another process holding it makes us wait (busy_timeout)
        # instead of failing at our first write.
        self.db.execute("BEGIN IMMEDIATE")
        try:
            yield self.db
            self.db.execute("COMMIT")
        except BaseException:
            self.db.execute("ROLLBACK")
            raise

    def _run(self, sql: str, args: Iterable[Any] = ()) -> None:
        with self._tx() as db:
            db.execute(sql, tuple(args))

    # ---- alerts -------------------------------------------------------------------------------------

    @_locked
    def load_alerts(self) -> list[TrackedAlert]:
        out = [alert(orjson.loads(b)) for (b,) in self.db.execute("SELECT body FROM alerts")]
        # Rows written before the fingerprint became Alertmanager's (FNV-1a of the labels) are keyed
        # again, so an alert firing across the upgrade stays one alert.
        stale = [a for a in out if a.fingerprint != fingerprint(a.labels)]
        if not stale:
            return out
        fresh = [replace(a, fingerprint=fingerprint(a.labels)) for a in stale]
        with self._tx() as db:
            db.executemany("DELETE FROM alerts WHERE fingerprint = ?", ((a.fingerprint,) for a in stale))
            db.executemany(
                "INSERT OR REPLACE INTO alerts (fingerprint, body) VALUES (?, ?)",
                ((a.fingerprint, orjson.dumps(alert_body(a))) for a in fresh),
            )
        keep = {a.fingerprint for a in stale}
        return [a for a in out if a.fingerprint not in keep] + fresh

    @_locked
    def save_alerts(self, upsert: Iterable[TrackedAlert], delete: Iterable[str] = ()) -> None:
        with self._tx() as db:
            db.executemany(
                "INSERT OR REPLACE INTO alerts (fingerprint, body) VALUES (?, ?)",
                ((a.fingerprint, orjson.dumps(alert_body(a))) for a in upsert),
            )
            db.executemany("DELETE FROM alerts WHERE fingerprint = ?", ((fp,) for fp in delete))

    # ---- silences -----------------------------------------------------------------------------------

    @_locked
    def silences(self) -> list[Silence]:
        rows = self.db.execute("SELECT body FROM silences ORDER BY ends_at DESC")
        return [silence(orjson.loads(b)) for (b,) in rows]

    @_locked
    def put_silence(self, s: Silence) -> None:
        self._run(
            "INSERT OR REPLACE INTO silences (id, body, ends_at) VALUES (?, ?, ?)",
            (s.id, orjson.dumps(silence_body(s)), s.ends_at),
        )

    # ---- notification log and outbox ----------------------------------------------------------------

    @_locked
    def nflog(self, integration: str, group_key: str) -> NotifyEntry | None:
        row = self.db.execute(
            "SELECT firing, resolved, at FROM nflog WHERE integration = ? AND group_key = ?",
            (integration, group_key),
        ).fetchone()
        if row is None:
            return None
        return NotifyEntry(frozenset(orjson.loads(row[0])), frozenset(orjson.loads(row[1])), row[2])

    @_locked
    def enqueue(self, items: Iterable[tuple[OutboxMessage | None, str, str, NotifyEntry]]) -> int:
        """Store notifications and the log entries that record them, all or nothing; a message whose key
        is already stored is not stored twice. Items: (message or None, integration, group key, entry)."""
        n = 0
        with self._tx() as db:
            for msg, integration, group_key, entry in items:
                if msg is not None:
                    cur = db.execute(
                        "INSERT OR IGNORE INTO outbox (key, integration, group_key, payload, created,"
                        " next_attempt, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        new_message_row(msg),
                    )
                    n += cur.rowcount
                db.execute(
                    "INSERT OR REPLACE INTO nflog (integration, group_key, firing, resolved, at)"
                    " VALUES (?, ?, ?, ?, ?)",
                    (
                        integration,
                        group_key,
                        orjson.dumps(sorted(entry.firing)),
                        orjson.dumps(sorted(entry.resolved)),
                        entry.at,
                    ),
                )
        return n

    @_locked
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

    @_locked
    def next_attempt_at(self) -> float | None:
        row = self.db.execute(
            "SELECT MIN(next_attempt) FROM outbox WHERE status = 'pending'"
            " AND integration NOT IN (SELECT integration FROM disabled_integrations)"
        ).fetchone()
        return row[0] if row else None

    @_locked
    def begin_attempt(self, msg_id: int, now: float) -> None:
        """Record an attempt before it is made: a crash during it is then known, and retried once."""
        self._run("UPDATE outbox SET attempts = attempts + 1, last_error = '' WHERE id = ?", (msg_id,))

    @_locked
    def delivered(self, msg_id: int, now: float) -> None:
        self._run("UPDATE outbox SET status = 'delivered', delivered_at = ? WHERE id = ?", (now, msg_id))

    @_locked
    def retry_at(self, msg_id: int, when: float, error: str) -> None:
        self._run(
            "UPDATE outbox SET next_attempt = ?, last_error = ? WHERE id = ?", (when, error[:500], msg_id)
        )

    @_locked
    def failed(self, msg_id: int, error: str) -> None:
        self._run("UPDATE outbox SET status = 'failed', last_error = ? WHERE id = ?", (error[:500], msg_id))

    @_locked
    def disable(self, integration: str, reason: str, now: float, *, config: str = "") -> None:
        """Stop delivering to an integration; `config` is a digest of its configuration at that moment,
        so a changed configuration can be recognised and the integration enabled again."""
        with self._tx() as db:
            db.execute(
                "INSERT OR REPLACE INTO disabled_integrations (integration, reason, at, config)"
                " VALUES (?, ?, ?, ?)",
                (integration, reason[:500], now, config),
            )
            db.execute(
                "UPDATE outbox SET status = 'disabled' WHERE integration = ? AND status = 'pending'",
                (integration,),
            )

    @_locked
    def enable(self, integration: str, now: float) -> bool:
        """Deliver to an integration again; return False if it was not disabled.

        The messages held back while it was disabled are pending again, in their order: the notification
        log records them as sent, so dropping them would leave the receiver without news of those groups
        until their repeat interval.
        """
        with self._tx() as db:
            cur = db.execute("DELETE FROM disabled_integrations WHERE integration = ?", (integration,))
            db.execute(
                "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt = ?, last_error = ''"
                " WHERE integration = ? AND status = 'disabled'",
                (now, integration),
            )
        return cur.rowcount > 0

    @_locked
    def disabled(self) -> dict[str, str]:
        return dict(self.db.execute("SELECT integration, reason FROM disabled_integrations").fetchall())

    @_locked
    def disabled_details(self) -> list[DisabledIntegration]:
        rows = self.db.execute(
            "SELECT integration, reason, at, config FROM disabled_integrations ORDER BY integration"
        )
        return [DisabledIntegration(i, r or "", a or 0.0, c or "") for i, r, a, c in rows]

    @_locked
    def depth(self) -> dict[str, int]:
        """Return pending messages per integration."""
        rows = self.db.execute(
            "SELECT integration, COUNT(*) FROM outbox WHERE status = 'pending' GROUP BY integration"
        )
        return dict(rows.fetchall())

    @_locked
    def oldest_pending(self) -> float | None:
        row = self.db.execute("SELECT MIN(created) FROM outbox WHERE status = 'pending'").fetchone()
        return row[0] if row else None

    @_locked
    def messages(self, *, limit: int = 50, status: str | None = None) -> list[OutboxMessage]:
        """Return the newest messages first (for the status page and tests)."""
        if status is None:
            rows = self.db.execute(_NEWEST, (limit,))
        else:
            rows = self.db.execute(_NEWEST_WITH_STATUS, (status, limit))
        return [message(r) for r in rows]

    # ---- messages sent once per key, ever (the weekly report) ---------------------------------------

    @_locked
    def recorded(self, keys: Iterable[str]) -> set[str]:
        wanted = set(keys)
        # One read of the table: a week's keys number the recipients, the table a few hundred weeks of them.
        return {k for (k,) in self.db.execute("SELECT key FROM sent_once") if k in wanted}

    @_locked
    def enqueue_once(self, messages: Iterable[OutboxMessage], now: float) -> int:
        """Record each message's key and enqueue it, all in one transaction; a key recorded before (even if
        its outbox row has since been pruned) enqueues nothing."""
        n = 0
        with self._tx() as db:
            for msg in messages:
                cur = db.execute("INSERT OR IGNORE INTO sent_once (key, at) VALUES (?, ?)", (msg.key, now))
                if cur.rowcount == 0:
                    continue
                db.execute(
                    "INSERT OR IGNORE INTO outbox (key, integration, group_key, payload, created,"
                    " next_attempt, status) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    new_message_row(msg),
                )
                n += 1
        return n

    @_locked
    def prune_keys(self, before: float) -> int:
        with self._tx() as db:
            return db.execute("DELETE FROM sent_once WHERE at < ?", (before,)).rowcount

    # ---- retention ----------------------------------------------------------------------------------

    @_locked
    def prune(self, now: float, *, silence_retention: float, delivered_retention: float) -> PruneResult:
        """Return the rows removed, per table, of what the store no longer acts on (one transaction).

        Removed: silences that ended more than `silence_retention` ago; messages delivered, or given up
        (failed) at their last attempt, more than `delivered_retention` ago; notification-log entries of
        groups told that everything resolved, written more than `delivered_retention` ago. Pending
        messages (retrying ones included) and disabled ones (pending again when their integration is
        enabled) are kept whatever their age.
        """
        silences_before = now - silence_retention
        delivered_before = now - delivered_retention
        with self._tx() as db:
            silences = db.execute("DELETE FROM silences WHERE ends_at < ?", (silences_before,)).rowcount
            # A failed row has no time of failure: its next_attempt is when its last attempt fell due.
            outbox = db.execute(
                "DELETE FROM outbox WHERE (status = 'delivered' AND delivered_at < ?)"
                " OR (status = 'failed' AND next_attempt < ?)",
                (delivered_before, delivered_before),
            ).rowcount
            # Only entries with nothing firing: for the dedup stage (needs_update) such an entry decides
            # exactly as no entry does, at any repeat_interval. An entry with alerts firing is kept: without
            # it a group that resolves would never be told so, and one still firing would be told early.
            nflog = db.execute(
                "DELETE FROM nflog WHERE firing = ? AND at < ?", (NOTHING_FIRING, delivered_before)
            ).rowcount
        return PruneResult(silences=silences, outbox=outbox, nflog=nflog)
