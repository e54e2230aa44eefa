"""The alert state store in PostgreSQL (psycopg 3): what the SQLite store keeps, for replicas that share it.

The statements and the logic are the SQL store's (sql.py), as on SQLite: every method is one transaction;
a message is marked as attempted before it is sent, so a crash resends at most that one. On top, `due`
claims the heads it hands out (row locks taken with SKIP LOCKED, then a claim column): a second replica
skips a claimed message until the claim is released (delivered, retried later, failed), its database
session is gone (the process died), or `claim_for` has passed (the process lost the database but might
still be sending).

One connection, guarded by a lock (the store is used from the event loop and from worker threads). A
connection that broke is opened again at the next call; the call that met the break raises.

A connection that stays open and carries nothing is a broken one too: each call is bounded by `timeout`
(the migration by `migration_timeout`), past which the connection is cut (deadline.py); libpq's TCP
keepalives and `tcp_user_timeout` notice a peer that vanished sooner. The server is told the same bounds
for the session (`statement_timeout`, `idle_in_transaction_session_timeout`), so a transaction whose client
went silent (a migration holding the migration lock, a claim's row locks) is ended and its locks released
rather than kept until the server's own TCP gives up.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import psycopg

from watchtower.domain.alerts.outbox import OutboxMessage

from . import migrations
from .deadline import Deadline
from .rows import message, new_message_row
from .sql import MESSAGE_COLUMNS, SqlAlertStore, locked, statements
from .url import masked, password_of, scrub

log = logging.getLogger(__name__)

# Any constant: replicas starting together take it so that one migrates and the others wait.
_MIGRATION_LOCK = 0x57415443  # "WATC"

# The messages of `following` this session may claim: due, and held by no other live session (as `due`).
_FOLLOWING = (
    f"{MESSAGE_COLUMNS} WHERE id = ANY(%(ids)s) AND status = 'pending' AND next_attempt <= %(now)s"  # noqa: S608
    " AND (claim_pid IS NULL OR claimed_until < %(now)s"
    "  OR (claim_pid = %(pid)s AND claim_started IS NOT DISTINCT FROM %(started)s)"
    "  OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = outbox.claim_pid"
    "   AND (a.backend_start IS NULL OR a.backend_start = outbox.claim_started)))"
    " ORDER BY id FOR UPDATE SKIP LOCKED"
)

# Added to a call's bound before the client cuts the connection: the server's own `statement_timeout`
# answers first when the server is only slow, leaving the connection usable.
_GRACE = 2.0


class StoreConnectError(Exception):
    """The database cannot be reached or refused us; the message shows the URL with its password masked.

    `transient` says whether trying again may help: the server unreachable, shutting down or starting up,
    the connection dropped (a migration under way included); not a wrong password or a missing database."""

    def __init__(self, message: str, *, transient: bool = False) -> None:
        super().__init__(message)
        self.transient = transient


# SQLSTATEs of a server going or coming back: connection exceptions (08), an operator or crash shutdown,
# "the database system is starting up", too many connections. No SQLSTATE at all is libpq's own failure
# (refused, timed out, closed unexpectedly).
# Also a statement the server cancelled at the session's `statement_timeout` (57014: a lock held too long by
# a session whose client went silent, which the server ends in its turn) and our session ended by
# `idle_in_transaction_session_timeout` (25P03).
_TRANSIENT_STATES = ("57P01", "57P02", "57P03", "53300", "57014", "25P03")


def _transient(e: BaseException) -> bool:
    state = getattr(e, "sqlstate", None)
    return isinstance(e, psycopg.OperationalError) and (
        state is None or state.startswith("08") or state in _TRANSIENT_STATES
    )


class PostgresAlertStore(SqlAlertStore):
    _sql = statements("postgresql")

    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        claim_for: float = 120.0,
        connect_timeout: float = 10.0,
        timeout: float = 20.0,
        migration_timeout: float = 60.0,
    ) -> None:
        self.shown = masked(url)
        self.claim_for = claim_for
        self.timeout, self.migration_timeout = timeout, migration_timeout
        self._deadline = Deadline()
        self._bound, self._bound_name = timeout, "store.timeout"
        self._url, self._password, self._timeout = url, password, connect_timeout
        self._secrets = tuple(s for s in (password or "", password_of(url)) if s)
        self._lock = threading.RLock()
        self._db: psycopg.Connection[Any] | None = None
        self._session: tuple[int, Any] = (0, None)
        with self._lock:
            try:
                self.schema_version = self._migrate()
            except BaseException:
                self.close()  # a caller trying again opens a new store: this one's connection goes now
                raise

    # ---- the connection -----------------------------------------------------------------------------

    def _conn(self) -> psycopg.Connection[Any]:
        db = self._db
        if db is not None and not db.closed and not db.broken:
            return db
        kw: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, round(self._timeout))}
        if self._password is not None:
            kw["password"] = self._password
        db = None
        self._deadline.fired = False  # said of the call that cut the last connection, not of this one
        try:
            kw |= self._tcp_settings()
            db = psycopg.connect(self._url, **kw)
            ms = str(max(1, round(self.timeout * 1000)))
            # Inside the try: a server shutting down can drop the connection as soon as it is made.
            with self._deadline.bound(db.fileno(), self._bound + _GRACE):
                row = db.execute(
                    "SELECT pg_backend_pid(),"
                    " (SELECT backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()),"
                    " set_config('statement_timeout', %s, false),"
                    " set_config('idle_in_transaction_session_timeout', %s, false)",
                    (ms, ms),
                ).fetchone()
        except psycopg.Error as e:
            if db is not None:
                db.close()
            raise StoreConnectError(
                f"cannot open the alert store {self.shown}: {self._failure(e)}", transient=_transient(e)
            ) from None
        except Exception as e:  # a malformed URL: the message may quote it
            raise StoreConnectError(f"cannot open the alert store {self.shown}: {self._scrub(e)}") from None
        self._db, self._session = db, (row[0], row[1]) if row else (0, None)
        return db

    def _tcp_settings(self) -> dict[str, Any]:
        """libpq's TCP settings, derived from the call's bound unless the URL names them: a peer gone
        without a word is noticed within about `timeout` (keepalive probes from half of it, three of them
        a sixth apart; sent data left unacknowledged for `timeout`)."""
        named = psycopg.conninfo.conninfo_to_dict(self._url)
        derived = {
            "keepalives": 1,
            "keepalives_idle": max(1, round(self.timeout / 2)),
            "keepalives_interval": max(1, round(self.timeout / 6)),
            "keepalives_count": 3,
            "tcp_user_timeout": max(1, round(self.timeout * 1000)),
        }
        return {k: v for k, v in derived.items() if k not in named}

    def _scrub(self, e: BaseException) -> str:
        return scrub(masked(str(e).strip()), *self._secrets)

    def _failure(self, e: BaseException) -> str:
        if self._deadline.fired:
            return (
                f"no answer within {self._bound:g}s ({self._bound_name} and a {_GRACE:g}s grace): the"
                " connection was taken for lost and cut"
            )
        return self._scrub(e)

    @contextlib.contextmanager
    def _connection(self) -> Iterator[psycopg.Connection[Any]]:
        """Yield the connection inside one transaction (every call is one): committed if the block ends,
        else rolled back."""
        db = self._conn()
        try:
            with self._deadline.bound(db.fileno(), self._bound + _GRACE), db.transaction():
                yield db
        except psycopg.Error as e:
            # The database went away: say so without the URL's secrets; the next call reconnects. A cut
            # connection may surface as another psycopg error, depending on where the call was.
            cut = self._deadline.fired
            if not cut and not isinstance(e, psycopg.OperationalError):
                raise
            raise StoreConnectError(
                f"the alert store {self.shown} failed: {self._failure(e)}", transient=cut or _transient(e)
            ) from None

    def _transaction(self, db: psycopg.Connection[Any]) -> contextlib.AbstractContextManager[Any]:
        # The call's transaction is open already (`_connection`): its writes are part of it.
        return contextlib.nullcontext(db)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """Yield the connection in one transaction under the store's lock: for the fairness history,
        which shares this database (and its migrations) with the store."""
        with self._lock, self._tx() as db:
            yield db

    def _migrate(self) -> int:
        """Apply the migrations after the stored version, all in one transaction with the version's update
        and under an advisory lock: a replica starting beside one that migrates waits, then finds nothing
        to do; a connection lost mid-way rolls the whole of it back (the server sees no COMMIT)."""
        applied: list[str] = []
        self._bound, self._bound_name = self.migration_timeout, "store.migration_timeout"
        try:
            with self._tx() as db:
                # Its statements may take longer than a call at run time: the waits on the migration lock
                # behind another replica's migration among them.
                db.execute(
                    "SELECT set_config('statement_timeout', %s, true)",
                    (str(max(1, round(self.migration_timeout * 1000))),),
                )
                version = self._migrate_in(db, applied)
        finally:
            self._bound, self._bound_name = self.timeout, "store.timeout"
        # Said once committed: a migration the database rolled back (the connection cut) is not "migrated".
        for line in applied:
            log.info("%s", line)
        return version

    def _migrate_in(self, db: psycopg.Connection[Any], applied: list[str]) -> int:
        db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        row = db.execute("SELECT version FROM schema_version").fetchone()
        current = row[0] if row else 0
        version = migrations.apply(
            current, migrations.POSTGRES, where=self.shown, execute=db.execute, log=applied.append
        )
        if row is None:
            db.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
        elif version != current:
            db.execute("UPDATE schema_version SET version = %s", (version,))
        return version

    @locked
    def close(self) -> None:
        if self._db is not None:
            self._db.close()
        self._deadline.close()

    @locked
    def due(self, now: float) -> list[OutboxMessage]:
        """Return, per enabled integration, its oldest pending message if its next attempt is due and no
        other live session holds it, claimed for this session: an integration delivers in order, so a
        message waits for the one before it, and one message goes to one sender at a time."""
        with self._tx() as db:
            pid, started = self._session
            rows = db.execute(
                "SELECT o.id, o.key, o.integration, o.group_key, o.payload, o.created, o.attempts,"
                " o.next_attempt, o.status, o.last_error, o.delivered_at FROM outbox o JOIN ("
                "  SELECT DISTINCT ON (integration) id FROM outbox WHERE status = 'pending'"
                "  ORDER BY integration, id"
                ") h ON o.id = h.id"
                # Repeated on o: the row lock re-checks o's conditions on the row as committed since our
                # snapshot, not the head subquery's, and a head delivered meanwhile carries no claim.
                " WHERE o.status = 'pending' AND o.next_attempt <= %(now)s"
                " AND o.integration NOT IN (SELECT integration FROM disabled_integrations)"
                " AND (o.claim_pid IS NULL OR o.claimed_until < %(now)s"
                "  OR (o.claim_pid = %(pid)s AND o.claim_started IS NOT DISTINCT FROM %(started)s)"
                # The claimer's session is gone (backend_start is hidden from other roles: the pid suffices,
                # and a reused pid only makes us wait for claimed_until).
                "  OR NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = o.claim_pid"
                "   AND (a.backend_start IS NULL OR a.backend_start = o.claim_started)))"
                " ORDER BY o.id FOR UPDATE OF o SKIP LOCKED",
                {"now": now, "pid": pid, "started": started},
            ).fetchall()
            if rows:
                db.execute(
                    "UPDATE outbox SET claim_pid = %s, claim_started = %s, claimed_until = %s"
                    " WHERE id = ANY(%s)",
                    (pid, started, now + self.claim_for, [r[0] for r in rows]),
                )
        return [message(r) for r in rows]

    @locked
    def following(self, head: OutboxMessage, now: float, limit: int) -> list[OutboxMessage]:
        """Return up to `limit` pending messages of `head`'s integration after it, in order, as long as
        each is due and no other live session holds it, claimed for this session (as `due` claims heads):
        what its lane may send next, in one batch with `head`, which this session holds already."""
        with self._tx() as db:
            pid, started = self._session
            order = [r[0] for r in db.execute(self._sql.following_ids, (head.integration, head.id, limit))]
            rows = db.execute(
                _FOLLOWING,
                {"ids": order, "now": now, "pid": pid, "started": started},
            ).fetchall()
            # Only the unbroken run after the head: a message skipped (held elsewhere, not yet due) keeps
            # every later one of its integration waiting, as the lane's order says.
            got = {r[0]: r for r in rows}
            run = []
            for i in order:
                if i not in got:
                    break
                run.append(got[i])
            if run:
                db.execute(
                    "UPDATE outbox SET claim_pid = %s, claim_started = %s, claimed_until = %s WHERE id = ANY(%s)",
                    (pid, started, now + self.claim_for, [r[0] for r in run]),
                )
        return [message(r) for r in run]

    @locked
    def enqueue_once(self, messages: Iterable[OutboxMessage], now: float) -> int:
        """`SqlAlertStore.enqueue_once` in two statements, not two round trips per message: the keys are
        recorded all at once, and the insert says which were new (a key another replica recorded first
        is not returned, so its message is not stored twice); a storm's 10,000 owner notices held the
        store for seconds."""
        first: dict[str, OutboxMessage] = {}
        for m in messages:
            first.setdefault(m.key, m)
        if not first:
            return 0
        with self._tx() as db:
            rows = db.execute(
                "INSERT INTO sent_once (key, at) SELECT k, %s FROM unnest(%s::text[]) AS k"
                " ON CONFLICT (key) DO NOTHING RETURNING key",
                (now, list(first)),
            ).fetchall()
            fresh = {k for (k,) in rows}
            new = [m for k, m in first.items() if k in fresh]  # in their order: a lane sends in id order
            if new:
                db.cursor().executemany(self._sql.insert_message, [new_message_row(m) for m in new])
        return len(new)

    @locked
    def recorded(self, keys: Iterable[str]) -> set[str]:
        wanted = list(set(keys))
        if not wanted:
            return set()
        with self._tx() as db:
            rows = db.execute("SELECT key FROM sent_once WHERE key = ANY(%s)", (wanted,)).fetchall()
        return {r[0] for r in rows}
