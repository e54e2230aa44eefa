"""Choosing the store by `store.url`, and keeping its password out of every message: on real SQLite files and a
real PostgreSQL (the PostgreSQL cases skip, saying why, where it cannot run)."""

from __future__ import annotations

import logging

import pytest

from tests.fixtures import postgres
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.adapters.store.url import StoreUrlError, masked, store_target
from watchtower.bootstrap import StartupError, open_alert_store
from watchtower.config import ConfigError, settings_from_mapping


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("postgresql://w:hunter2@db:5432/w", "postgresql://w:***@db:5432/w"),
        ("postgresql://w:p%40ss%2F@db/w?sslmode=require", "postgresql://w:***@db/w?sslmode=require"),
        (
            "postgresql://w@db/w?sslmode=require&password=hunter2",
            "postgresql://w@db/w?sslmode=require&password=***",
        ),
        ("postgresql://db/w", "postgresql://db/w"),
    ],
)
def test_a_shown_url_never_carries_its_password(url, shown):
    assert masked(url) == shown
    assert store_target(url).shown == shown


def test_sqlite_urls_and_plain_paths_name_files_and_other_schemes_are_refused(tmp_path):
    assert store_target("sqlite:///var/lib/w.db").location == "/var/lib/w.db"
    assert store_target("sqlite:w.db").location == "w.db"
    assert store_target(str(tmp_path / "w.db")).kind == "sqlite"
    with pytest.raises(StoreUrlError, match="unknown database 'mysql'") as e:
        store_target("mysql://root:hunter2@db/w")
    assert "hunter2" not in str(e.value)


def test_a_url_of_an_unknown_database_is_a_config_error_that_does_not_quote_it():
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({"store": {"url": "mysql://root:hunter2@db/w"}}, env={})
    assert e.value.problems[0].startswith("store.url: unknown database 'mysql'")
    assert "hunter2" not in str(e.value)


def test_a_password_written_in_the_url_in_the_file_is_warned_about_without_its_value(caplog):
    with caplog.at_level(logging.WARNING):
        settings_from_mapping({"store": {"url": "postgresql://w:hunter2@db/w"}}, env={})
    assert "store.url carries a password" in caplog.text and "hunter2" not in caplog.text


def test_store_url_names_the_sqlite_file_the_service_opens(tmp_path):
    s = settings_from_mapping({"store": {"url": f"sqlite://{tmp_path}/alerts.db"}}, env={})
    store = open_alert_store(s)
    assert isinstance(store, SQLiteAlertStore) and store.path == f"{tmp_path}/alerts.db"
    store.close()


@pytest.fixture
def pg(postgres_server):
    if isinstance(postgres_server, postgres.Unavailable):
        pytest.skip(f"PostgreSQL cannot run here: {postgres_server}")
    return postgres_server


def test_the_service_opens_postgresql_with_the_password_from_a_file_and_logs_no_secret(pg, tmp_path, caplog):
    db = pg.database()
    s = settings_from_mapping(
        {"store": {"url": pg.url(db), "password_file": str(pg.password_file)}},
        env={},
    )
    with caplog.at_level(logging.INFO):
        store = open_alert_store(s)
    assert type(store).__name__ == "PostgresAlertStore"
    assert store.depth() == {}
    store.close()
    assert f"alert store: PostgreSQL at {pg.url(db)}" in caplog.text
    assert postgres.PASSWORD not in caplog.text


def test_a_wrong_password_is_one_line_with_the_url_masked(pg, tmp_path, caplog):
    db = pg.database()
    wrong = "n0t-the-Passw0rd"
    url = pg.url(db).replace(f"{postgres.USER}@", f"{postgres.USER}:{wrong}@")
    s = settings_from_mapping({"store": {"url": url}}, env={})
    with caplog.at_level(logging.DEBUG), pytest.raises(StartupError) as e:
        open_alert_store(s)
    msg = str(e.value)
    assert msg.startswith(f"cannot open the alert store {masked(url)}: ")
    assert "password authentication failed" in msg
    assert wrong not in msg and wrong not in caplog.text


def test_an_unreachable_database_is_one_line_naming_it(tmp_path):
    s = settings_from_mapping(
        {"store": {"url": "postgresql://w:hunter2@127.0.0.1:1/w?connect_timeout=2"}}, env={}
    )
    pytest.importorskip("psycopg", reason="psycopg is not installed: pip install 'psycopg[binary]'")
    with pytest.raises(StartupError) as e:
        open_alert_store(s)
    assert str(e.value).startswith("cannot open the alert store postgresql://w:***@127.0.0.1:1/w")
    assert "hunter2" not in str(e.value)
