"""The alert state store as SQL, the same on SQLite and PostgreSQL: its statements, written once with the
database's parameter marker and its few words that differ, and every method whose logic both share.

What stays with a database is its shell (sqlite.py, postgres.py): the connection and its locking, how one
call meets a transaction (SQLite reads outside any, so a reader never takes the write lock; PostgreSQL runs
every call in one), and what only one of them does: PostgreSQL's claims on the messages `due` hands out
(`FOR UPDATE SKIP LOCKED`), and `recorded`'s lookup (PostgreSQL matches an array; SQLite has none).

Every method is one transaction, so a crash leaves either the old or the new state, never half; and a
message is marked as attempted before it is sent, so a crash resends at most that one (a batched lane:
at most the messages sent since its last write).

Size: one statement table and one class for the whole store, so that both databases run the very same
logic; split by table, each part would need the shell's connection and lock all the same.
"""

# The statements are put together from constant table and column names and the marker, once, at import;
# every value is a bound parameter (S608 cannot tell).
# ruff: noqa: S608

from __future__ import annotations

import contextlib
import functools
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Concatenate, Literal, ParamSpec, TypeVar

import orjson

from watchtower.domain.alerts.model import TrackedAlert, fingerprint
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import DisabledIntegration, OutboxMessage, PruneResult
from watchtower.domain.alerts.silences import Silence

from .rows import NOTHING_FIRING, alert, alert_body, message, new_message_row, silence, silence_body

Dialect = Literal["sqlite", "postgresql"]

# An outbox row as `rows.message` reads it.
MESSAGE_COLUMNS = (
    "SELECT id, key, integration, group_key, payload, created, attempts, next_attempt, status, last_error,"
    " delivered_at FROM outbox"
)
# PostgreSQL's claim columns, emptied when a message's attempt ends (SQLite has none: one replica).
UNCLAIM = "claim_pid = NULL, claim_started = NULL, claimed_until = NULL"


def _upsert(dialect: Dialect, mark: str, table: str, key: tuple[str, ...], cols: tuple[str, ...]) -> str:
    """Return the insert of a row (its key columns, then `cols`) replacing the row stored under its key."""
    names, marks = ", ".join(key + cols), ", ".join([mark] * (len(key) + len(cols)))
    if dialect == "sqlite":
        # REPLACE deletes the stored row and inserts the new one, as this store always has on SQLite.
        return f"INSERT OR REPLACE INTO {table} ({names}) VALUES ({marks})"
    sets = ", ".join(f"{c} = EXCLUDED.{c}" for c in cols)
    on_key = f"ON CONFLICT ({', '.join(key)}) DO UPDATE SET {sets}"
    return f"INSERT INTO {table} ({names}) VALUES ({marks}) {on_key}"


def _insert_new(dialect: Dialect, mark: str, table: str, cols: tuple[str, ...]) -> str:
    """Return the insert of a row (`key` first) that does nothing when its key is stored already."""
    names, marks = ", ".join(("key", *cols)), ", ".join([mark] * (1 + len(cols)))
    if dialect == "sqlite":
        return f"INSERT OR IGNORE INTO {table} ({names}) VALUES ({marks})"
    return f"INSERT INTO {table} ({names}) VALUES ({marks}) ON CONFLICT (key) DO NOTHING"


@dataclass(frozen=True, slots=True)
class Statements:
    alerts: str
    upsert_alert: str  # (fingerprint, body)
    delete_alert: str  # (fingerprint,)
    silences: str
    upsert_silence: str  # (id, body, ends_at)
    nflog: str  # (integration, group_key)
    nflogs: str  # (integration,)
    upsert_nflog: str  # (integration, group_key, firing, resolved, at)
    insert_message: str  # rows.new_message_row
    next_attempt_at: str
    begin_attempt: str  # (id,)
    unbegin_attempt: str  # (id,)
    following: str  # (integration, after id, limit)
    following_ids: str  # (integration, after id, limit)
    delivered: str  # (now, id)
    retry_at: str  # (when, error, id)
    failed: str  # (error, id)
    disable: str  # (integration, reason, at, config)
    hold_pending: str  # (integration,)
    enable: str  # (integration,)
    release_held: str  # (now, integration)
    disabled: str
    disabled_details: str
    depth: str
    oldest_pending: str
    newest: str  # (limit,)
    newest_with_status: str  # (status, limit)
    record_key: str  # (key, at)
    prune_keys: str  # (before,)
    prune_silences: str  # (before,)
    prune_outbox: str  # (delivered before, failed before)
    prune_nflog: str  # (NOTHING_FIRING, before)


def statements(dialect: Dialect) -> Statements:
    """Return the store's statements in `dialect`: `?` or `%s` as the marker, SQLite's `OR REPLACE`/`OR
    IGNORE` or PostgreSQL's `ON CONFLICT`, and on PostgreSQL the claim a message's attempt releases."""
    m = "?" if dialect == "sqlite" else "%s"
    release = "" if dialect == "sqlite" else f", {UNCLAIM}"
    # A message claimed by another replica is not ours before its claim lapses (GREATEST skips NULL).
    next_due = "next_attempt" if dialect == "sqlite" else "GREATEST(next_attempt, claimed_until)"
    enabled = "integration NOT IN (SELECT integration FROM disabled_integrations)"
    return Statements(
        alerts="SELECT body FROM alerts",
        upsert_alert=_upsert(dialect, m, "alerts", ("fingerprint",), ("body",)),
        delete_alert=f"DELETE FROM alerts WHERE fingerprint = {m}",
        silences="SELECT body FROM silences ORDER BY ends_at DESC",
        upsert_silence=_upsert(dialect, m, "silences", ("id",), ("body", "ends_at")),
        nflog=f"SELECT firing, resolved, at FROM nflog WHERE integration = {m} AND group_key = {m}",
        nflogs=f"SELECT group_key, firing, resolved, at FROM nflog WHERE integration = {m}",
        upsert_nflog=_upsert(dialect, m, "nflog", ("integration", "group_key"), ("firing", "resolved", "at")),
        insert_message=_insert_new(
            dialect, m, "outbox", ("integration", "group_key", "payload", "created", "next_attempt", "status")
        ),
        next_attempt_at=f"SELECT MIN({next_due}) FROM outbox WHERE status = 'pending' AND {enabled}",
        begin_attempt=f"UPDATE outbox SET attempts = attempts + 1, last_error = '' WHERE id = {m}",
        # A message begun with its batch but never sent: its attempt did not happen.
        unbegin_attempt=f"UPDATE outbox SET attempts = attempts - 1{release} WHERE id = {m} AND attempts > 0",
        following=(
            f"{MESSAGE_COLUMNS} WHERE integration = {m} AND status = 'pending' AND id > {m} ORDER BY id LIMIT {m}"
        ),
        following_ids=(
            f"SELECT id FROM outbox WHERE integration = {m} AND status = 'pending' AND id > {m}"
            f" ORDER BY id LIMIT {m}"
        ),
        delivered=f"UPDATE outbox SET status = 'delivered', delivered_at = {m}{release} WHERE id = {m}",
        retry_at=f"UPDATE outbox SET next_attempt = {m}, last_error = {m}{release} WHERE id = {m}",
        failed=f"UPDATE outbox SET status = 'failed', last_error = {m}{release} WHERE id = {m}",
        disable=_upsert(dialect, m, "disabled_integrations", ("integration",), ("reason", "at", "config")),
        hold_pending=(
            f"UPDATE outbox SET status = 'disabled'{release} WHERE integration = {m} AND status = 'pending'"
        ),
        enable=f"DELETE FROM disabled_integrations WHERE integration = {m}",
        release_held=(
            f"UPDATE outbox SET status = 'pending', attempts = 0, next_attempt = {m}, last_error = ''"
            f" WHERE integration = {m} AND status = 'disabled'"
        ),
        disabled="SELECT integration, reason FROM disabled_integrations",
        disabled_details=(
            "SELECT integration, reason, at, config FROM disabled_integrations ORDER BY integration"
        ),
        depth="SELECT integration, COUNT(*) FROM outbox WHERE status = 'pending' GROUP BY integration",
        oldest_pending="SELECT MIN(created) FROM outbox WHERE status = 'pending'",
        newest=f"{MESSAGE_COLUMNS} ORDER BY id DESC LIMIT {m}",
        newest_with_status=f"{MESSAGE_COLUMNS} WHERE status = {m} ORDER BY id DESC LIMIT {m}",
        record_key=_insert_new(dialect, m, "sent_once", ("at",)),
        prune_keys=f"DELETE FROM sent_once WHERE at < {m}",
        prune_silences=f"DELETE FROM silences WHERE ends_at < {m}",
        prune_outbox=(
            f"DELETE FROM outbox WHERE (status = 'delivered' AND delivered_at < {m})"
            f" OR (status = 'failed' AND next_attempt < {m})"
        ),
        prune_nflog=f"DELETE FROM nflog WHERE firing = {m} AND at < {m}",
    )


S = TypeVar("S", bound="SqlAlertStore")
P = ParamSpec("P")
R = TypeVar("R")


def locked(method: Callable[Concatenate[S, P], R]) -> Callable[Concatenate[S, P], R]:
    """Return `method` run under the store's lock: the store is used from the event loop and from worker
    threads (the alerting service saves a storm's alerts off the loop) on one connection."""

    @functools.wraps(method)
    def wrapper(self: S, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class SqlAlertStore:
    """What the two alert stores do alike. A shell gives its `_sql`, its `_lock`, `_connection()` (the
    connection for one call: SQLite's as it is, PostgreSQL's inside a transaction) and `_transaction(db)`
    (a block of writes on it in one transaction: SQLite begins one, PostgreSQL is in one already)."""

    _sql: ClassVar[Statements]
    _lock: threading.RLock

    def _connection(self) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    def _transaction(self, db: Any) -> contextlib.AbstractContextManager[Any]:
        raise NotImplementedError

    @contextlib.contextmanager
    def _tx(self) -> Iterator[Any]:
        """Yield the connection inside one transaction: committed if the block ends, else rolled back."""
        with self._connection() as db, self._transaction(db) as tx:
            yield tx

    def _read(self, sql: str, args: Iterable[Any] = ()) -> list[tuple[Any, ...]]:
        params = tuple(args)
        with self._connection() as db:
            # Without parameters the statement is sent as it is (psycopg then parses no placeholders).
            cur = db.execute(sql, params) if params else db.execute(sql)
            return list(cur.fetchall())

    def _one(self, sql: str, args: Iterable[Any] = ()) -> tuple[Any, ...] | None:
        rows = self._read(sql, args)
        return rows[0] if rows else None

    def _run(self, sql: str, args: Iterable[Any] = ()) -> int:
        with self._tx() as db:
            return int(db.execute(sql, tuple(args)).rowcount)

    # ---- alerts -------------------------------------------------------------------------------------

    @locked
    def load_alerts(self) -> list[TrackedAlert]:
        with self._connection() as db:
            out = [alert(orjson.loads(b)) for (b,) in db.execute(self._sql.alerts).fetchall()]
            # Rows written before the fingerprint became Alertmanager's (FNV-1a of the labels) are keyed
            # again, so an alert firing across the upgrade stays one alert.
            stale = [a for a in out if a.fingerprint != fingerprint(a.labels, a.unkeyed)]
            if not stale:
                return out
            fresh = [replace(a, fingerprint=fingerprint(a.labels, a.unkeyed)) for a in stale]
            with self._transaction(db) as tx:
                cur = tx.cursor()
                cur.executemany(self._sql.delete_alert, [(a.fingerprint,) for a in stale])
                cur.executemany(
                    self._sql.upsert_alert, [(a.fingerprint, orjson.dumps(alert_body(a))) for a in fresh]
                )
        keep = {a.fingerprint for a in stale}
        return [a for a in out if a.fingerprint not in keep] + fresh

    @locked
    def save_alerts(self, upsert: Iterable[TrackedAlert], delete: Iterable[str] = ()) -> None:
        rows = [(a.fingerprint, orjson.dumps(alert_body(a))) for a in upsert]
        gone = [(fp,) for fp in delete]
        with self._tx() as db:
            cur = db.cursor()
            if rows:
                cur.executemany(self._sql.upsert_alert, rows)
            if gone:
                cur.executemany(self._sql.delete_alert, gone)

    # ---- silences -----------------------------------------------------------------------------------

    @locked
    def silences(self) -> list[Silence]:
        return [silence(orjson.loads(b)) for (b,) in self._read(self._sql.silences)]

    @locked
    def put_silence(self, s: Silence) -> None:
        self._run(self._sql.upsert_silence, (s.id, orjson.dumps(silence_body(s)), s.ends_at))

    # ---- notification log and outbox ----------------------------------------------------------------

    @locked
    def nflog(self, integration: str, group_key: str) -> NotifyEntry | None:
        row = self._one(self._sql.nflog, (integration, group_key))
        if row is None:
            return None
        return NotifyEntry(frozenset(orjson.loads(row[0])), frozenset(orjson.loads(row[1])), row[2])

    @locked
    def nflogs(self, integration: str) -> dict[str, NotifyEntry]:
        """Return every entry of one integration's log by group key, in one read (owner notices' ledgers:
        a storm touches thousands of owners at once)."""
        return {
            g: NotifyEntry(frozenset(orjson.loads(f)), frozenset(orjson.loads(r)), at)
            for g, f, r, at in self._read(self._sql.nflogs, (integration,))
        }

    @locked
    def enqueue(self, items: Iterable[tuple[OutboxMessage | None, str, str, NotifyEntry]]) -> int:
        """Store notifications and the log entries that record them, all or nothing; a message whose key
        is already stored is not stored twice. Items: (message or None, integration, group key, entry)."""
        n = 0
        logs: list[tuple[Any, ...]] = []
        with self._tx() as db:
            for msg, integration, group_key, entry in items:
                if msg is not None:
                    n += db.execute(self._sql.insert_message, new_message_row(msg)).rowcount
                logs.append(
                    (
                        integration,
                        group_key,
                        orjson.dumps(sorted(entry.firing)),
                        orjson.dumps(sorted(entry.resolved)),
                        entry.at,
                    )
                )
            # All at once (one round trip on PostgreSQL): a storm writes 2,000 owners' ledgers in one call.
            if logs:
                db.cursor().executemany(self._sql.upsert_nflog, logs)
        return n

    @locked
    def next_attempt_at(self) -> float | None:
        row = self._one(self._sql.next_attempt_at)
        return row[0] if row else None

    @locked
    def begin_attempt(self, msg_id: int, now: float) -> None:
        """Record an attempt before it is made: a crash during it is then known, and retried once."""
        self._run(self._sql.begin_attempt, (msg_id,))

    @locked
    def delivered(self, msg_id: int, now: float) -> None:
        self._run(self._sql.delivered, (now, msg_id))

    # A lane that sends many messages (owner notices in a storm) records them a batch at a time: one synced
    # transaction for a batch's attempts and one for its outcomes, not two per message.

    @locked
    def begin_attempts(self, msg_ids: Sequence[int], now: float) -> None:
        """Record the attempts of a batch before any of them is made (`begin_attempt`, all at once)."""
        with self._tx() as db:
            db.cursor().executemany(self._sql.begin_attempt, [(i,) for i in msg_ids])

    @locked
    def settle(self, delivered: Sequence[int], now: float, unattempted: Sequence[int] = ()) -> None:
        """Record a batch's outcome in one transaction: `delivered` were sent; `unattempted` were begun with
        the batch but not sent (their attempt is taken back; they stay pending, in their order)."""
        with self._tx() as db:
            cur = db.cursor()
            if delivered:
                cur.executemany(self._sql.delivered, [(now, i) for i in delivered])
            if unattempted:
                cur.executemany(self._sql.unbegin_attempt, [(i,) for i in unattempted])

    @locked
    def retry_at(self, msg_id: int, when: float, error: str) -> None:
        self._run(self._sql.retry_at, (when, error[:500], msg_id))

    @locked
    def failed(self, msg_id: int, error: str) -> None:
        self._run(self._sql.failed, (error[:500], msg_id))

    @locked
    def disable(self, integration: str, reason: str, now: float, *, config: str = "") -> None:
        """Stop delivering to an integration; `config` is a digest of its configuration at that moment,
        so a changed configuration can be recognised and the integration enabled again."""
        with self._tx() as db:
            db.execute(self._sql.disable, (integration, reason[:500], now, config))
            db.execute(self._sql.hold_pending, (integration,))

    @locked
    def enable(self, integration: str, now: float) -> bool:
        """Deliver to an integration again; return False if it was not disabled.

        The messages held back while it was disabled are pending again, in their order: the notification
        log records them as sent, so dropping them would leave the receiver without news of those groups
        until their repeat interval.
        """
        with self._tx() as db:
            n: int = db.execute(self._sql.enable, (integration,)).rowcount
            db.execute(self._sql.release_held, (now, integration))
        return n > 0

    @locked
    def disabled(self) -> dict[str, str]:
        return dict(self._read(self._sql.disabled))

    @locked
    def disabled_details(self) -> list[DisabledIntegration]:
        rows = self._read(self._sql.disabled_details)
        return [DisabledIntegration(i, r or "", a or 0.0, c or "") for i, r, a, c in rows]

    @locked
    def depth(self) -> dict[str, int]:
        """Return pending messages per integration."""
        return dict(self._read(self._sql.depth))

    @locked
    def oldest_pending(self) -> float | None:
        row = self._one(self._sql.oldest_pending)
        return row[0] if row else None

    @locked
    def messages(self, *, limit: int = 50, status: str | None = None) -> list[OutboxMessage]:
        """Return the newest messages first (for the status page and tests)."""
        if status is None:
            rows = self._read(self._sql.newest, (limit,))
        else:
            rows = self._read(self._sql.newest_with_status, (status, limit))
        return [message(r) for r in rows]

    # ---- messages sent once per key, ever (the weekly report) ---------------------------------------

    @locked
    def enqueue_once(self, messages: Iterable[OutboxMessage], now: float) -> int:
        """Record each message's key and enqueue it, all in one transaction; a key recorded before (even if
        its outbox row has since been pruned, or another replica recorded it) enqueues nothing."""
        n = 0
        with self._tx() as db:
            for msg in messages:
                if db.execute(self._sql.record_key, (msg.key, now)).rowcount == 0:
                    continue
                db.execute(self._sql.insert_message, new_message_row(msg))
                n += 1
        return n

    @locked
    def prune_keys(self, before: float) -> int:
        return self._run(self._sql.prune_keys, (before,))

    # ---- retention ----------------------------------------------------------------------------------

    @locked
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
            silences = db.execute(self._sql.prune_silences, (silences_before,)).rowcount
            # A failed row has no time of failure: its next_attempt is when its last attempt fell due.
            outbox = db.execute(self._sql.prune_outbox, (delivered_before, delivered_before)).rowcount
            # Only entries with nothing firing: for the dedup stage (needs_update) such an entry decides
            # exactly as no entry does, at any repeat_interval. An entry with alerts firing is kept: without
            # it a group that resolves would never be told so, and one still firing would be told early.
            nflog = db.execute(self._sql.prune_nflog, (NOTHING_FIRING, delivered_before)).rowcount
        return PruneResult(silences=silences, outbox=outbox, nflog=nflog)
