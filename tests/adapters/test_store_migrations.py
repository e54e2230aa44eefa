"""Schema migrations of the alert store: an older store is brought up to date at start with its rows intact,
a fresh one starts at the latest version, a newer one is refused untouched, a failed step leaves the old
version whole. On a real SQLite file and a real PostgreSQL."""

from __future__ import annotations

import sqlite3
import threading

import pytest

from tests.fixtures.stores import StoreBackend
from watchtower.adapters.store import migrations
from watchtower.adapters.store.migrations import Migration, StoreVersionError
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.domain.alerts.model import AlertState, TrackedAlert, fingerprint
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage

NOW = 1_800_000_000.0
OPS = "ops/webhook/0"

# The schema the store wrote before it recorded a version (the release before migrations), verbatim.
UNVERSIONED_SCHEMA = """
CREATE TABLE IF NOT EXISTS alerts (fingerprint TEXT PRIMARY KEY, body BLOB NOT NULL);
CREATE TABLE IF NOT EXISTS silences (id TEXT PRIMARY KEY, body BLOB NOT NULL, ends_at REAL NOT NULL);
CREATE TABLE IF NOT EXISTS nflog (
    integration TEXT NOT NULL, group_key TEXT NOT NULL,
    firing BLOB NOT NULL, resolved BLOB NOT NULL, at REAL NOT NULL,
    PRIMARY KEY (integration, group_key));
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    key TEXT NOT NULL UNIQUE,
    integration TEXT NOT NULL,
    group_key TEXT NOT NULL,
    payload BLOB NOT NULL,
    created REAL NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt REAL NOT NULL,
    status TEXT NOT NULL,
    last_error TEXT NOT NULL DEFAULT '',
    delivered_at REAL);
CREATE INDEX IF NOT EXISTS outbox_pending ON outbox (status, integration, id);
CREATE TABLE IF NOT EXISTS disabled_integrations (integration TEXT PRIMARY KEY, reason TEXT, at REAL,
    config TEXT NOT NULL DEFAULT '');
"""
LABELS = {"alertname": "WorkloadWaitWarning", "namespace": "team-a"}
ALERT_BODY = (
    b'{"fingerprint":"%s","labels":{"alertname":"WorkloadWaitWarning","namespace":"team-a"},'
    b'"annotations":{},"state":"firing","active_at":1.0,"last_seen":2.0,"fired_at":1.5,"resolved_at":null}'
    % fingerprint(LABELS).encode()
)


def _unversioned_store(path, *, with_config_column: bool = True) -> None:
    """Write a store as the release before migrations did: its schema and one row in each table."""
    schema = UNVERSIONED_SCHEMA
    if not with_config_column:  # the release before disabled integrations remembered their configuration
        schema = schema.replace(",\n    config TEXT NOT NULL DEFAULT ''", "")
    db = sqlite3.connect(path)
    db.executescript(schema)
    db.execute("INSERT INTO alerts VALUES (?, ?)", (fingerprint(LABELS), ALERT_BODY))
    db.execute(
        "INSERT INTO outbox (key, integration, group_key, payload, created, next_attempt, status)"
        " VALUES ('msg_1', ?, 'g', '{\"version\":\"4\"}', ?, ?, 'pending')",
        (OPS, NOW, NOW),
    )
    db.execute("INSERT INTO nflog VALUES (?, 'g', '[\"a\"]', '[]', ?)", (OPS, NOW))
    db.execute(
        "INSERT INTO disabled_integrations (integration, reason, at) VALUES ('gone/webhook/0', '410', ?)",
        (NOW,),
    )
    db.commit()
    db.close()


def _version_of(path) -> int:
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT version FROM schema_version").fetchone()[0]
    finally:
        db.close()


@pytest.mark.parametrize("with_config_column", [True, False], ids=["current", "before-config-digests"])
def test_a_sqlite_store_written_before_migrations_is_migrated_with_its_rows_intact(
    tmp_path, with_config_column
):
    path = tmp_path / "alerts.db"
    _unversioned_store(path, with_config_column=with_config_column)

    store = SQLiteAlertStore(path)
    assert store.schema_version == migrations.latest(migrations.SQLITE) == _version_of(path)
    assert [a.labels for a in store.load_alerts()] == [LABELS]
    assert [m.key for m in store.due(NOW)] == ["msg_1"]
    assert store.nflog(OPS, "g") == NotifyEntry(frozenset({"a"}), frozenset(), NOW)
    assert store.disabled() == {"gone/webhook/0": "410"}
    store.disable("other/webhook/0", "410 Gone", NOW, config="digest")  # the column the migration added
    assert {d.integration: d.config for d in store.disabled_details()} == {
        "gone/webhook/0": "",
        "other/webhook/0": "digest",
    }
    store.close()
    again = SQLiteAlertStore(path)  # a second start finds nothing to do
    assert again.schema_version == migrations.latest(migrations.SQLITE)
    assert [m.key for m in again.messages()] == ["msg_1"]
    again.close()


def test_a_fresh_store_starts_at_the_latest_version_and_keeps_it_on_restart(store_backend: StoreBackend):
    known = migrations.latest(migrations.SQLITE if store_backend.kind == "sqlite" else migrations.POSTGRES)
    store = store_backend.open()
    assert store.schema_version == known
    msg = OutboxMessage(0, "k1", OPS, "g", {"version": "4"}, NOW, next_attempt=NOW)
    store.enqueue([(msg, OPS, "g", NotifyEntry(frozenset({"a"}), frozenset(), NOW))])
    store.close()
    again = store_backend.open()
    assert again.schema_version == known
    assert [m.key for m in again.due(NOW)] == ["k1"]


def _set_version(store_backend: StoreBackend, version: int) -> None:
    if store_backend.kind == "sqlite":
        db = sqlite3.connect(store_backend.spec)
        db.execute("UPDATE schema_version SET version = ?", (version,))
        db.commit()
        db.close()
    else:
        import psycopg

        with psycopg.connect(store_backend.spec, autocommit=True) as db:
            db.execute("UPDATE schema_version SET version = %s", (version,))


def test_a_store_written_by_a_newer_watchtower_is_refused_and_left_untouched(store_backend: StoreBackend):
    store = store_backend.open()
    labels = {"alertname": "X"}
    store.save_alerts([TrackedAlert(fingerprint(labels), labels, {}, AlertState.FIRING, 1.0, 2.0)])
    store.close()
    _set_version(store_backend, 99)

    with pytest.raises(
        StoreVersionError, match=r"schema version 99, but this Watchtower knows versions up to \d"
    ):
        store_backend.open()

    known = migrations.latest(migrations.SQLITE if store_backend.kind == "sqlite" else migrations.POSTGRES)
    _set_version(store_backend, known)  # back as this version wrote it: the row is still there
    again = store_backend.open()
    assert [a.labels for a in again.load_alerts()] == [labels]


def test_a_migration_that_fails_half_way_leaves_the_previous_version_whole(
    store_backend: StoreBackend, monkeypatch
):
    store_backend.open().close()
    name = "SQLITE" if store_backend.kind == "sqlite" else "POSTGRES"
    known = getattr(migrations, name)
    broken = Migration(
        len(known) + 1,
        "a step whose second statement fails",
        ("CREATE TABLE half_done (x INTEGER)", "ALTER TABLE no_such_table ADD COLUMN y INTEGER"),
    )
    monkeypatch.setattr(migrations, name, (*known, broken))
    with pytest.raises(Exception, match="no_such_table"):
        store_backend.open()
    monkeypatch.setattr(migrations, name, known)

    store = store_backend.open()
    assert store.schema_version == len(known)
    if store_backend.kind == "sqlite":
        db = sqlite3.connect(store_backend.spec)
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        db.close()
    else:
        import psycopg

        with psycopg.connect(store_backend.spec) as db:
            tables = {r[0] for r in db.execute("SELECT tablename FROM pg_tables WHERE schemaname = 'public'")}
    assert "half_done" not in tables and "outbox" in tables


def test_replicas_starting_together_on_a_fresh_postgresql_migrate_it_once(store_backend: StoreBackend):
    if store_backend.kind != "postgresql":
        pytest.skip("SQLite serves one replica; concurrent starts are PostgreSQL's case")
    errors: list[BaseException] = []
    versions: list[int] = []

    def start() -> None:
        try:
            versions.append(store_backend.open().schema_version)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    assert versions == [migrations.latest(migrations.POSTGRES)] * 4


def test_migrations_are_numbered_without_gaps():
    for ms in (migrations.SQLITE, migrations.POSTGRES):
        migrations.check_numbering(ms)
    with pytest.raises(ValueError, match="numbered"):
        migrations.check_numbering((migrations.SQLITE[0], Migration(3, "skips 2", ())))
