"""Outbox throughput of the alert store, on SQLite and on PostgreSQL: messages per second through
enqueue → due → begin_attempt → delivered, each call its own transaction as the service makes them (one
enqueue per notification group, then per message the attempt and its outcome), several integrations
draining side by side as the delivery worker drains them.

Reference, measured in the same run on the same database: a bare `executemany` inserting the same rows
into a table of the outbox's shape, in one transaction: what the database does with the rows alone.

PostgreSQL is started here (initdb into a temporary directory, loopback, fsync on: durable like SQLite's
synchronous=FULL) unless --pg-url names one; without PostgreSQL its half is skipped, saying why.
Run: .venv/bin/python -m bench.store [--messages 2000] [--integrations 8] [--pg-url postgresql://...]
"""

from __future__ import annotations

import argparse
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.ports import AlertStore

NOW = 1_800_000_000.0


def _payload(i: int) -> dict[str, Any]:
    # A webhook body of one alert, as the notifier builds it: about 1 KB.
    return {
        "version": "4",
        "groupKey": f'{{}}:{{alertname="WorkloadWaitWarning", tier="t{i % 4}"}}',
        "status": "firing",
        "receiver": "ops",
        "alerts": [
            {
                "status": "firing",
                "labels": {
                    "alertname": "WorkloadWaitWarning",
                    "namespace": f"team-{i % 20}",
                    "workload": f"job-{i}",
                },
                "annotations": {"summary": f"job-{i} has waited 31m", "description": "x" * 600},
                "startsAt": "2027-01-15T08:00:00Z",
            }
        ],
    }


def _items(n: int, integrations: int) -> list[tuple[OutboxMessage, str, str, NotifyEntry]]:
    out = []
    for i in range(n):
        integration = f"r{i % integrations}/webhook/0"
        key = f"msg_{i:08d}"
        msg = OutboxMessage(0, key, integration, f"g{i}", _payload(i), NOW, next_attempt=NOW)
        out.append((msg, integration, f"g{i}", NotifyEntry(frozenset({key}), frozenset(), NOW)))
    return out


def through(store: AlertStore, items: list[tuple[OutboxMessage, str, str, NotifyEntry]]) -> float:
    """Return the seconds to enqueue every item (one transaction each) and drain them all."""
    start = time.perf_counter()
    for item in items:
        store.enqueue([item])
    sent = 0
    while True:
        heads = store.due(NOW)
        if not heads:
            break
        for m in heads:
            store.begin_attempt(m.id, NOW)
            store.delivered(m.id, NOW)
        sent += len(heads)
    took = time.perf_counter() - start
    assert sent == len(items), (sent, len(items))
    return took


def _rows(items: list[tuple[OutboxMessage, str, str, NotifyEntry]]) -> list[tuple[Any, ...]]:
    return [
        (m.key, m.integration, m.group_key, orjson.dumps(m.payload), m.created, m.next_attempt, "pending")
        for m, *_ in items
    ]


_TABLE = (
    "CREATE TABLE bare (id {id}, key TEXT NOT NULL UNIQUE, integration TEXT NOT NULL, group_key TEXT NOT NULL,"
    " payload {blob} NOT NULL, created {real} NOT NULL, next_attempt {real} NOT NULL, status TEXT NOT NULL)"
)


def reference_sqlite(path: Path, rows: list[tuple[Any, ...]]) -> float:
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute(_TABLE.format(id="INTEGER PRIMARY KEY AUTOINCREMENT", blob="BLOB", real="REAL"))
    start = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    db.executemany(
        "INSERT INTO bare (key, integration, group_key, payload, created, next_attempt, status)"
        " VALUES (?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    db.execute("COMMIT")
    took = time.perf_counter() - start
    db.close()
    return took


def reference_postgres(url: str, rows: list[tuple[Any, ...]]) -> float:
    import psycopg

    with psycopg.connect(url, autocommit=True) as db:
        db.execute("DROP TABLE IF EXISTS bare")
        db.execute(
            _TABLE.format(id="BIGINT GENERATED ALWAYS AS IDENTITY", blob="BYTEA", real="DOUBLE PRECISION")
        )
        start = time.perf_counter()
        with db.transaction():
            db.cursor().executemany(
                "INSERT INTO bare (key, integration, group_key, payload, created, next_attempt, status)"
                " VALUES (%s, %s, %s, %s, %s, %s, %s)",
                rows,
            )
        took = time.perf_counter() - start
        db.execute("DROP TABLE bare")
    return took


def report(name: str, n: int, took: float, ref: float) -> None:
    print(f"[{name}] outbox: {n} messages enqueue→due→delivered in {took:.2f} s = {n / took:,.0f} messages/s")
    print(
        f"[{name}]   reference: bare executemany of the same {n} rows, one transaction: {ref:.3f} s = {n / ref:,.0f} rows/s"
    )


def run_backend(
    name: str, open_store: Callable[[], AlertStore], reference: Callable[[], float], n: int, k: int
) -> None:
    items = _items(n, k)
    store = open_store()
    try:
        took = through(store, items)
    finally:
        store.close()
    report(name, n, took, reference())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--integrations", type=int, default=8)
    ap.add_argument("--pg-url", default="", help="an existing PostgreSQL (its database is written to)")
    args = ap.parse_args()
    n, k = args.messages, args.integrations
    rows = _rows(_items(n, k))
    with tempfile.TemporaryDirectory(prefix="watchtower-bench-store-") as tmp:
        run_backend(
            "sqlite",
            lambda: SQLiteAlertStore(Path(tmp) / "alerts.db"),
            lambda: reference_sqlite(Path(tmp) / "bare.db", rows),
            n,
            k,
        )
    server = None
    url = args.pg_url
    if not url:
        from tests.fixtures import postgres

        try:
            server = postgres.start(fsync=True)
        except postgres.Unavailable as e:
            print(f"[postgresql] skipped: {e}")
            return
        url = server.url(server.database(), with_password=True)
    try:
        from watchtower.adapters.store.postgres import PostgresAlertStore

        run_backend(
            "postgresql", lambda: PostgresAlertStore(url), lambda: reference_postgres(url, rows), n, k
        )
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
