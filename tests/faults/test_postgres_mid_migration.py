"""PostgreSQL lost in the middle of a schema migration, with two `watchtower run` replicas starting together
on a store one version behind that holds undelivered messages. Real parts throughout: a PostgreSQL server of
the test's own, the fault proxy (tests/faults/proxy.py) between each replica and it, two real processes (the
simulated cluster as their source, so no API server is needed), a real HTTP webhook receiver (it checks no
signature: the replicas sign with the simulator's clock, which a receiver's check of the time would refuse).

How the test lands in the middle, every time: before the replicas start, the test's own session holds the
`schema_version` table in EXCLUSIVE mode. That mode lets reads through (the migration reads the version and
runs every statement of the pending step) and blocks writes: the migration stops at its very last
statement, the version's UPDATE, with the new tables made but not committed. The test waits until
`pg_stat_activity` shows exactly that (one replica waiting on the UPDATE, the other on the migration's
advisory lock), so no sleep decides where the fault falls. Then, by the parameter:

- `restart`: PostgreSQL is stopped (fast shutdown: every session ends, the migration is rolled back) and
  started 3 s later;
- `cut`: the proxy cuts both replicas' connections (TCP reset); the server keeps their sessions until they
  next write, so the test then lets its lock go: the orphaned migration reaches its UPDATE, cannot answer
  and is rolled back, having never been sent a COMMIT.

What holds: both processes come up by themselves (same pid, no restart) once the database answers again,
having said they try again; the migration is applied once (one "migrated" line across both logs) and the
version is the latest; the messages written before it are all there and each is delivered exactly once.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.faults.hooks import IdReceiver as Receiver
from tests.faults.proxy import FaultProxy
from tests.fixtures import postgres
from watchtower.adapters.store import migrations
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage, OutboxStatus

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL cannot run here: psycopg is not installed")
from watchtower.adapters.store.postgres import PostgresAlertStore  # noqa: E402

INTEGRATION = "ops/webhook/0"
MESSAGES = 6
LATEST = migrations.latest(migrations.POSTGRES)


@pytest.fixture
def own_server() -> Iterator[postgres.PostgresServer]:
    try:
        server = postgres.start()
    except postgres.Unavailable as e:
        pytest.skip(f"PostgreSQL cannot run here: {e}")
    yield server
    server.stop()


def _wait(what: str, probe: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = probe()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.1)


class Replica:
    """One `watchtower run` process, started and stopped by its pid."""

    def __init__(self, name: str, config: Path, workdir: Path) -> None:
        self.name, self.out, self.err = name, workdir / f"{name}.out", workdir / f"{name}.err"
        env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
        with self.out.open("wb") as o, self.err.open("wb") as e:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "watchtower.cli", "run", "--config", str(config)],
                stdout=o,
                stderr=e,
                env=env,
            )

    def serving(self) -> bool:
        assert self.proc.poll() is None, f"{self.name} exited with {self.proc.returncode}:\n{self.log()}"
        return "serving at " in self.out.read_text(errors="replace")

    def log(self) -> str:
        return self.err.read_text(errors="replace")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


def _store_one_version_behind(url: str, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Bring a new database to the version before the latest and leave pending messages in it."""
    with monkeypatch.context() as m:
        m.setattr(migrations, "POSTGRES", migrations.POSTGRES[:-1])
        store = PostgresAlertStore(url)
    assert store.schema_version == LATEST - 1
    now = time.time()
    keys = [f"before-migration-{i}" for i in range(MESSAGES)]
    store.enqueue(
        (
            # Due at once by any clock: the replicas run on the simulator's.
            OutboxMessage(0, key, INTEGRATION, key, {"alerts": [], "n": i}, now, next_attempt=0.0),
            INTEGRATION,
            key,
            NotifyEntry(frozenset(), frozenset(), now),
        )
        for i, key in enumerate(keys)
    )
    store.close()
    return keys


def _config(path: Path, *, store_url: str, hooks: Receiver) -> Path:
    config = {
        "cluster": {"source": "sim"},
        "server": {"host": "127.0.0.1", "port": 0},
        "store": {"url": store_url, "start_wait": "60s"},
        "alerting": {
            "route": {"receiver": "ops"},
            "receivers": [{"name": "ops", "webhooks": [{"url": hooks.url}]}],
            "delivery": {"backoff_base": "0.2s", "backoff_cap": "1s"},
        },
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    return path


def _waiting(admin: Any, db: str) -> dict[str, int]:
    """Return how many sessions of the database wait on a lock, by what they wait in."""
    rows = admin.execute(
        "SELECT query FROM pg_stat_activity WHERE datname = %s AND wait_event_type = 'Lock'", (db,)
    ).fetchall()
    out: Counter[str] = Counter()
    for (query,) in rows:
        if query.startswith("UPDATE schema_version"):
            out["the version's update"] += 1
        elif "pg_advisory_xact_lock" in query:
            out["the migration lock"] += 1
    return dict(out)


@pytest.mark.parametrize("fault", ["restart", "cut"])
def test_postgresql_lost_mid_migration_two_replicas_come_up_by_themselves_and_migrate_once(
    own_server: postgres.PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, fault: str
) -> None:
    db = own_server.database()
    direct = own_server.url(db, with_password=True)
    keys = _store_one_version_behind(direct, monkeypatch)
    proxy = FaultProxy(own_server.port).start()
    hooks = Receiver()
    through_proxy = direct.replace(f":{own_server.port}/", f":{proxy.port}/")
    config = _config(tmp_path / "replica.yaml", store_url=through_proxy, hooks=hooks)
    admin = psycopg.connect(direct, autocommit=True)
    holder = psycopg.connect(direct)  # its transaction holds the version table until the fault
    replicas: list[Replica] = []
    try:
        holder.execute("LOCK TABLE schema_version IN EXCLUSIVE MODE")
        replicas = [Replica(n, config, tmp_path) for n in ("replica-a", "replica-b")]
        _wait(
            "one replica's migration at its last statement, the other waiting for it",
            lambda: _waiting(admin, db) == {"the version's update": 1, "the migration lock": 1},
            timeout=90,
        )
        admin.close()
        faulted = time.monotonic()
        if fault == "restart":
            own_server.halt()
            time.sleep(3)
            own_server.launch()
        else:
            proxy.reset()
            holder.rollback()  # the orphaned migration goes on to its UPDATE, and is rolled back
        holder.close()
        _wait("both replicas serving", lambda: all(r.serving() for r in replicas), timeout=90)
        up = time.monotonic() - faulted
        _wait(
            "every message written before the migration delivered",
            lambda: set(keys) <= set(hooks.received()),
            timeout=60,
        )
        time.sleep(2)  # a second delivery of any of them would have arrived by now
    finally:
        for r in replicas:
            r.stop()
        hooks.stop()
        proxy.stop()

    logs = {r.name: r.log() for r in replicas}
    got = Counter(k for k in hooks.received() if k in keys)
    migrated = sum(log.count(f"migrated to schema version {LATEST} ") for log in logs.values())
    retried = {n: log.count("trying again in") for n, log in logs.items()}
    print(
        f"\nPostgreSQL {fault} mid-migration: both replicas serving {up:.1f}s after the fault; tries again"
        f" {retried}; migrated {migrated} time(s); {sum(got.values())} arrivals for {MESSAGES} messages"
    )
    for name, log in logs.items():
        assert "Traceback" not in log, f"{name}:\n{log[-3000:]}"
        assert retried[name] >= 1, f"{name} never had to try again: the fault missed it\n{log[-3000:]}"
    assert migrated == 1, "the migration is said (and done) once, by one replica"
    assert got == dict.fromkeys(keys, 1), "every message delivered, none twice"

    store = PostgresAlertStore(direct)
    try:
        assert store.schema_version == LATEST
        with store.transaction() as tx:
            assert tx.execute("SELECT version FROM schema_version").fetchall() == [(LATEST,)]
        rows = {m.key: m.status for m in store.messages(limit=1000)}
        assert {k: rows.get(k) for k in keys} == dict.fromkeys(keys, OutboxStatus.DELIVERED), "no row lost"
    finally:
        store.close()
