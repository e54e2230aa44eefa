"""A PostgreSQL connection that stays open and carries nothing (the fault proxy's blackhole, not a reset) in
the middle of a schema migration, with two `watchtower run` replicas starting together on a store one
version behind that holds undelivered messages. Real parts as in test_postgres_mid_migration.py (whose
helpers this uses), with one fault proxy per replica so that only one replica's connection goes silent.

How the test lands in the middle: as there, its own session holds `schema_version` in EXCLUSIVE mode until
`pg_stat_activity` shows one replica's migration waiting at its last statement (the version's UPDATE) and
the other replica waiting on the migration's advisory lock. The test finds which proxy carries the
migrating session (by its client port), blackholes that one (open connections carry nothing, new ones pass),
and lets its lock go: the orphaned migration runs its UPDATE, whose answer the proxy holds, and sits idle in
its transaction holding the advisory lock.

What holds: the server ends the orphaned transaction at `idle_in_transaction_session_timeout`
(`store.timeout`), releasing the lock; the other replica then migrates; the silent replica gives up its
call at `store.migration_timeout` and its grace, tries again on a new connection and finds nothing to do;
both serve (same processes), the migration is applied once, every message is delivered exactly once, no row
is lost.
"""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.faults.proxy import FaultProxy
from tests.faults.test_postgres_mid_migration import (
    LATEST,
    MESSAGES,
    Receiver,
    Replica,
    _store_one_version_behind,
    _wait,
    _waiting,
    own_server,  # noqa: F401  (the fixture)
)
from tests.fixtures import postgres
from watchtower.domain.alerts.outbox import OutboxStatus

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL cannot run here: psycopg is not installed")
from watchtower.adapters.store.postgres import PostgresAlertStore  # noqa: E402

TIMEOUT, MIGRATION_TIMEOUT = 3, 10  # store.timeout, store.migration_timeout of the replicas (seconds)


def _config(path: Path, *, store_url: str, hooks: Receiver) -> Path:
    config = {
        "cluster": {"source": "sim"},
        "server": {"host": "127.0.0.1", "port": 0},
        "store": {
            "url": store_url,
            "start_wait": "60s",
            "timeout": f"{TIMEOUT}s",
            "migration_timeout": f"{MIGRATION_TIMEOUT}s",
        },
        "alerting": {
            "route": {"receiver": "ops"},
            "receivers": [{"name": "ops", "webhooks": [{"url": hooks.url}]}],
            "delivery": {"backoff_base": "0.2s", "backoff_cap": "1s"},
        },
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def test_a_silent_connection_mid_migration_is_given_up_and_the_other_replica_migrates_once(
    own_server: postgres.PostgresServer,  # noqa: F811
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    db = own_server.database()
    direct = own_server.url(db, with_password=True)
    keys = _store_one_version_behind(direct, monkeypatch)
    hooks = Receiver()
    names = ("replica-a", "replica-b")
    proxies = {n: FaultProxy(own_server.port).start() for n in names}
    admin = psycopg.connect(direct, autocommit=True)
    holder = psycopg.connect(direct)  # its transaction holds the version table until the fault
    replicas: dict[str, Replica] = {}
    seen: dict[str, float] = {}
    try:
        holder.execute("LOCK TABLE schema_version IN EXCLUSIVE MODE")
        for n in names:
            url = direct.replace(f":{own_server.port}/", f":{proxies[n].port}/")
            replicas[n] = Replica(n, _config(tmp_path / f"{n}.yaml", store_url=url, hooks=hooks), tmp_path)
        _wait(
            "one replica's migration at its last statement, the other waiting for it",
            lambda: _waiting(admin, db) == {"the version's update": 1, "the migration lock": 1},
            timeout=60,
        )
        row = admin.execute(
            "SELECT client_port FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'"
            " AND query LIKE 'UPDATE schema_version%%'",
            (db,),
        ).fetchone()
        assert row is not None
        silent = next(n for n in names if row[0] in proxies[n].upstream_ports())
        other = next(n for n in names if n != silent)
        proxies[silent].blackhole(new=False)
        faulted = time.monotonic()
        holder.rollback()  # the orphaned migration goes on to its UPDATE, whose answer goes nowhere
        holder.close()

        def progress() -> bool:
            now = time.monotonic() - faulted
            if (
                "released" not in seen
                and not admin.execute(
                    "SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND granted AND pid IN"
                    " (SELECT pid FROM pg_stat_activity WHERE client_port = %s)",
                    (row[0],),
                ).fetchone()
            ):
                seen["released"] = now
            if "migrated" not in seen and "migrated to schema version" in replicas[other].log():
                seen["migrated"] = now
            if "given up" not in seen and "trying again in" in replicas[silent].log():
                seen["given up"] = now
            return all(r.serving() for r in replicas.values())

        _wait("both replicas serving", progress, timeout=90)
        seen["serving"] = time.monotonic() - faulted
        _wait(
            "every message written before the migration delivered",
            lambda: set(keys) <= set(hooks.received()),
            timeout=60,
        )
        time.sleep(2)  # a second delivery of any of them would have arrived by now
    finally:
        for r in replicas.values():
            r.stop()
        hooks.stop()
        for p in proxies.values():
            p.stop()
        admin.close()

    logs = {n: r.log() for n, r in replicas.items()}
    got = Counter(k for k in hooks.received() if k in keys)
    migrated = {n: log.count(f"migrated to schema version {LATEST} ") for n, log in logs.items()}
    print(
        f"\nPostgreSQL connection silent mid-migration ({silent}): after the fault, the server released"
        f" the orphaned migration's lock {seen.get('released', float('nan')):.1f}s in, {other} migrated"
        f" {seen.get('migrated', float('nan')):.1f}s in, {silent} gave up {seen.get('given up', float('nan')):.1f}s"
        f" in, both serving {seen['serving']:.1f}s in; migrated {migrated};"
        f" {sum(got.values())} arrivals for {MESSAGES} messages"
    )
    for name, log in logs.items():
        assert "Traceback" not in log, f"{name}:\n{log[-3000:]}"
    assert "no answer within" in logs[silent], logs[silent][-3000:]
    assert migrated == {silent: 0, other: 1}, "the other replica migrated, once"
    assert seen["released"] < TIMEOUT + 3, "the server ended the orphaned migration at its idle timeout"
    assert seen["given up"] < MIGRATION_TIMEOUT + 2 + 3, "the silent replica gave up within its bound"
    assert got == dict.fromkeys(keys, 1), "every message delivered, none twice"

    store = PostgresAlertStore(direct)
    try:
        assert store.schema_version == LATEST
        rows = {m.key: m.status for m in store.messages(limit=1000)}
        assert {k: rows.get(k) for k in keys} == dict.fromkeys(keys, OutboxStatus.DELIVERED), "no row lost"
    finally:
        store.close()
