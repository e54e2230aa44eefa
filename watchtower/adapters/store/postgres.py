"""The alert state store in PostgreSQL (psycopg 3): what the SQLite store keeps, for replicas that share it.

The semantics are the SQLite store's: every method is one transaction; a message is marked as attempted
before it is sent, so a crash resends at most that one. On top, `due` claims the heads it hands out (row
locks taken with SKIP LOCKED, then a claim column): a second replica skips a claimed message until the
claim is released (delivered, retried later, failed), its database session is gone (the process died),
or `claim_for` has passed (the process lost the database but might still be sending).

One connection, guarded by a lock (the store is used from the event loop and from worker threads). A
connection that broke is opened again at the next call; the call that met the break raises.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, Concatenate, ParamSpec, TypeVar

import orjson
import psycopg

from watchtower.domain.alerts.model import TrackedAlert, fingerprint
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import DisabledIntegration, OutboxMessage, PruneResult
from watchtower.domain.alerts.silences import Silence

from . import migrations
from .rows import NOTHING_FIRING, alert, alert_body, message, new_message_row, silence, silence_body
from .url import masked, password_of, scrub

log = logging.getLogger(__name__)

# Any constant: replicas starting together take it so that one migrates and the others wait.
_MIGRATION_LOCK = 0x57415443  # "WATC"

_COLUMNS = (
    "SELECT id, key, integration, group_key, payload, created, attempts, next_attempt, status, last_error,"
    " delivered_at FROM outbox"
)
_NEWEST = _COLUMNS + " ORDER BY id DESC LIMIT %s"
_NEWEST_WITH_STATUS = _COLUMNS + " WHERE status = %s ORDER BY id DESC LIMIT %s"
_UNCLAIM = "claim_pid = NULL, claim_started = NULL, claimed_until = NULL"

P = ParamSpec("P")
R = TypeVar("R")


class StoreConnectError(Exception):
    """The database cannot be reached or refused us; the message shows the URL with its password masked."""


def _locked(
    method: Callable[Concatenate[PostgresAlertStore, P], R],
) -> Callable[Concatenate[PostgresAlertStore, P], R]:
    @functools.wraps(method)
    def wrapper(self: PostgresAlertStore, /, *args: P.args, **kwargs: P.kwargs) -> R:
        with self._lock:
            return method(self, *args, **kwargs)

    return wrapper


class PostgresAlertStore:
    def __init__(
        self,
        url: str,
        *,
        password: str | None = None,
        claim_for: float = 120.0,
        connect_timeout: float = 10.0,
    ) -> None:
        self.shown = masked(url)
        self.claim_for = claim_for
        self._url, self._password, self._timeout = url, password, connect_timeout
        self._secrets = tuple(s for s in (password or "", password_of(url)) if s)
        self._lock = threading.RLock()
        self._db: psycopg.Connection[Any] | None = None
        self._session: tuple[int, Any] = (0, None)
        with self._lock:
            self.schema_version = self._migrate()

    # ---- the connection -----------------------------------------------------------------------------

    def _conn(self) -> psycopg.Connection[Any]:
        db = self._db
        if db is not None and not db.closed and not db.broken:
            return db
        kw: dict[str, Any] = {"autocommit": True, "connect_timeout": max(1, round(self._timeout))}
        if self._password is not None:
            kw["password"] = self._password
        try:
            db = psycopg.connect(self._url, **kw)
        except psycopg.Error as e:
            raise StoreConnectError(f"cannot open the alert store {self.shown}: {self._scrub(e)}") from None
        except Exception as e:  # a malformed URL: the message may quote it
            raise StoreConnectError(f"cannot open the alert store {self.shown}: {self._scrub(e)}") from None
        row = db.execute(
            "SELECT pg_backend_pid(), backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()"
        ).fetchone()
        self._db, self._session = db, (row[0], row[1]) if row else (0, None)
        return db

    def _scrub(self, e: BaseException) -> str:
        return scrub(masked(str(e).strip()), *self._secrets)

    @contextlib.contextmanager
    def _tx(self) -> Iterator[psycopg.Connection[Any]]:
        """Yield the connection inside one transaction: committed if the block ends, else rolled back."""
        db = self._conn()
        try:
            with db.transaction():
                yield db
        except psycopg.OperationalError as e:
            # The database went away: say so without the URL's secrets; the next call reconnects.
            raise StoreConnectError(f"the alert store {self.shown} failed: {self._scrub(e)}") from None

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection[Any]]:
        """Yield the connection in one transaction under the store's lock: for the fairness history,
        which shares this database (and its migrations) with the store."""
        with self._lock, self._tx() as db:
            yield db

    def _run(self, sql: str, args: Iterable[Any] = ()) -> int:
        with self._tx() as db:
            return db.execute(sql, tuple(args)).rowcount

    def _migrate(self) -> int:
        with self._tx() as db:
            db.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            row = db.execute("SELECT version FROM schema_version").fetchone()
            current = row[0] if row else 0
            version = migrations.apply(
                current, migrations.POSTGRES, where=self.shown, execute=db.execute, log=log.info
            )
            if row is None:
                db.execute("INSERT INTO schema_version (version) VALUES (%s)", (version,))
            elif version != current:
                db.execute("UPDATE schema_version SET version = %s", (version,))
        return version

    @_locked
    def close(self) -> None:
        if self._db is not None:
            self._db.close()

    # ---- alerts -------------------------------------------------------------------------------------

    @_locked
    def load_alerts(self) -> list[TrackedAlert]:
        with self._tx() as db:
            out = [alert(orjson.loads(b)) for (b,) in db.execute("SELECT body FROM alerts")]
            # Rows written before the fingerprint became Alertmanager's are keyed again (as in SQLite).
            stale = [a for a in out if a.fingerprint != fingerprint(a.labels)]
            if not stale:
                return out
            fresh = [replace(a, fingerprint=fingerprint(a.labels)) for a in stale]
            cur = db.cursor()
            cur.executemany("DELETE FROM alerts WHERE fingerprint = %s", [(a.fingerprint,) for a in stale])
            cur.executemany(
                "INSERT INTO alerts (fingerprint, body) VALUES (%s, %s)"
                " ON CONFLICT (fingerprint) DO UPDATE SET body = EXCLUDED.body",
                [(a.fingerprint, orjson.dumps(alert_body(a))) for a in fresh],
            )
        keep = {a.fingerprint for a in stale}
        return [a for a in out if a.fingerprint not in keep] + fresh

    @_locked
    def save_alerts(self, upsert: Iterable[TrackedAlert], delete: Iterable[str] = ()) -> None:
        rows = [(a.fingerprint, orjson.dumps(alert_body(a))) for a in upsert]
        gone = [(fp,) for fp in delete]
        with self._tx() as db:
            cur = db.cursor()
            if rows:
                cur.executemany(
                    "INSERT INTO alerts (fingerprint, body) VALUES (%s, %s)"
                    " ON CONFLICT (fingerprint) DO UPDATE SET body = EXCLUDED.body",
                    rows,
                )
            if gone:
                cur.executemany("DELETE FROM alerts WHERE fingerprint = %s", gone)

    # ---- silences -----------------------------------------------------------------------------------

    @_locked
    def silences(self) -> list[Silence]:
        with self._tx() as db:
            rows = db.execute("SELECT body FROM silences ORDER BY ends_at DESC").fetchall()
        return [silence(orjson.loads(b)) for (b,) in rows]

    @_locked
    def put_silence(self, s: Silence) -> None:
        self._run(
            "INSERT INTO silences (id, body, ends_at) VALUES (%s, %s, %s)"
            " ON CONFLICT (id) DO UPDATE SET body = EXCLUDED.body, ends_at = EXCLUDED.ends_at",
            (s.id, orjson.dumps(silence_body(s)), s.ends_at),
        )

    # ---- notification log and outbox ----------------------------------------------------------------

    @_locked
    def nflog(self, integration: str, group_key: str) -> NotifyEntry | None:
        with self._tx() as db:
            row = db.execute(
                "SELECT firing, resolved, at FROM nflog WHERE integration = %s AND group_key = %s",
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
                    n += db.execute(
                        "INSERT INTO outbox (key, integration, group_key, payload, created, next_attempt,"
                        " status) VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                        new_message_row(msg),
                    ).rowcount
                db.execute(
                    "INSERT INTO nflog (integration, group_key, firing, resolved, at)"
                    " VALUES (%s, %s, %s, %s, %s) ON CONFLICT (integration, group_key) DO UPDATE SET"
                    " firing = EXCLUDED.firing, resolved = EXCLUDED.resolved, at = EXCLUDED.at",
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

    @_locked
    def next_attempt_at(self) -> float | None:
        with self._tx() as db:
            # A message claimed elsewhere is not ours before its claim lapses (GREATEST skips NULL).
            row = db.execute(
                "SELECT MIN(GREATEST(next_attempt, claimed_until)) FROM outbox WHERE status = 'pending'"
                " AND integration NOT IN (SELECT integration FROM disabled_integrations)"
            ).fetchone()
        return row[0] if row else None

    @_locked
    def begin_attempt(self, msg_id: int, now: float) -> None:
        """Record an attempt before it is made: a crash during it is then known, and retried once."""
        self._run("UPDATE outbox SET attempts = attempts + 1, last_error = '' WHERE id = %s", (msg_id,))

    @_locked
    def delivered(self, msg_id: int, now: float) -> None:
        self._run(
            f"UPDATE outbox SET status = 'delivered', delivered_at = %s, {_UNCLAIM} WHERE id = %s",  # noqa: S608
            (now, msg_id),
        )

    @_locked
    def retry_at(self, msg_id: int, when: float, error: str) -> None:
        self._run(
            f"UPDATE outbox SET next_attempt = %s, last_error = %s, {_UNCLAIM} WHERE id = %s",  # noqa: S608
            (when, error[:500], msg_id),
        )

    @_locked
    def failed(self, msg_id: int, error: str) -> None:
        self._run(
            f"UPDATE outbox SET status = 'failed', last_error = %s, {_UNCLAIM} WHERE id = %s",  # noqa: S608
            (error[:500], msg_id),
        )

    @_locked
    def disable(self, integration: str, reason: str, now: float, *, config: str = "") -> None:
        """Stop delivering to an integration; `config` is a digest of its configuration at that moment,
        so a changed configuration can be recognised and the integration enabled again."""
        with self._tx() as db:
            db.execute(
                "INSERT INTO disabled_integrations (integration, reason, at, config) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (integration) DO UPDATE SET reason = EXCLUDED.reason, at = EXCLUDED.at,"
                " config = EXCLUDED.config",
                (integration, reason[:500], now, config),
            )
            db.execute(
                f"UPDATE outbox SET status = 'disabled', {_UNCLAIM}"  # noqa: S608
                " WHERE integration = %s AND status = 'pending'",
                (integration,),
            )

    @_locked
    def enable(self, integration: str, now: float) -> bool:
        """Deliver to an integration again; return False if it was not disabled (see SQLiteAlertStore)."""
        with self._tx() as db:
            n = db.execute(
                "DELETE FROM disabled_integrations WHERE integration = %s", (integration,)
            ).rowcount
            db.execute(
                "UPDATE outbox SET status = 'pending', attempts = 0, next_attempt = %s, last_error = ''"
                " WHERE integration = %s AND status = 'disabled'",
                (now, integration),
            )
        return n > 0

    @_locked
    def disabled(self) -> dict[str, str]:
        with self._tx() as db:
            return dict(db.execute("SELECT integration, reason FROM disabled_integrations").fetchall())

    @_locked
    def disabled_details(self) -> list[DisabledIntegration]:
        with self._tx() as db:
            rows = db.execute(
                "SELECT integration, reason, at, config FROM disabled_integrations ORDER BY integration"
            ).fetchall()
        return [DisabledIntegration(i, r or "", a or 0.0, c or "") for i, r, a, c in rows]

    @_locked
    def depth(self) -> dict[str, int]:
        """Return pending messages per integration."""
        with self._tx() as db:
            rows = db.execute(
                "SELECT integration, COUNT(*) FROM outbox WHERE status = 'pending' GROUP BY integration"
            ).fetchall()
        return dict(rows)

    @_locked
    def oldest_pending(self) -> float | None:
        with self._tx() as db:
            row = db.execute("SELECT MIN(created) FROM outbox WHERE status = 'pending'").fetchone()
        return row[0] if row else None

    @_locked
    def messages(self, *, limit: int = 50, status: str | None = None) -> list[OutboxMessage]:
        """Return the newest messages first (for the status page and tests)."""
        with self._tx() as db:
            if status is None:
                rows = db.execute(_NEWEST, (limit,)).fetchall()
            else:
                rows = db.execute(_NEWEST_WITH_STATUS, (status, limit)).fetchall()
        return [message(r) for r in rows]

    # ---- messages sent once per key, ever (the weekly report) ---------------------------------------

    @_locked
    def recorded(self, keys: Iterable[str]) -> set[str]:
        wanted = list(set(keys))
        if not wanted:
            return set()
        with self._tx() as db:
            rows = db.execute("SELECT key FROM sent_once WHERE key = ANY(%s)", (wanted,)).fetchall()
        return {r[0] for r in rows}

    @_locked
    def enqueue_once(self, messages: Iterable[OutboxMessage], now: float) -> int:
        """Record each message's key and enqueue it, all in one transaction; a key recorded before (even if
        its outbox row has since been pruned, or another replica recorded it) enqueues nothing."""
        n = 0
        with self._tx() as db:
            for msg in messages:
                cur = db.execute(
                    "INSERT INTO sent_once (key, at) VALUES (%s, %s) ON CONFLICT (key) DO NOTHING",
                    (msg.key, now),
                )
                if cur.rowcount == 0:
                    continue
                db.execute(
                    "INSERT INTO outbox (key, integration, group_key, payload, created, next_attempt, status)"
                    " VALUES (%s, %s, %s, %s, %s, %s, %s) ON CONFLICT (key) DO NOTHING",
                    new_message_row(msg),
                )
                n += 1
        return n

    @_locked
    def prune_keys(self, before: float) -> int:
        with self._tx() as db:
            return db.execute("DELETE FROM sent_once WHERE at < %s", (before,)).rowcount

    # ---- retention ----------------------------------------------------------------------------------

    @_locked
    def prune(self, now: float, *, silence_retention: float, delivered_retention: float) -> PruneResult:
        """Return the rows removed, per table (what SQLiteAlertStore.prune removes, by the same rules)."""
        silences_before = now - silence_retention
        delivered_before = now - delivered_retention
        with self._tx() as db:
            silences = db.execute("DELETE FROM silences WHERE ends_at < %s", (silences_before,)).rowcount
            outbox = db.execute(
                "DELETE FROM outbox WHERE (status = 'delivered' AND delivered_at < %s)"
                " OR (status = 'failed' AND next_attempt < %s)",
                (delivered_before, delivered_before),
            ).rowcount
            nflog = db.execute(
                "DELETE FROM nflog WHERE firing = %s AND at < %s", (NOTHING_FIRING, delivered_before)
            ).rowcount
        return PruneResult(silences=silences, outbox=outbox, nflog=nflog)
