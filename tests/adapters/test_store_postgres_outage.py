"""PostgreSQL going away under a running store: each call meanwhile fails with one clear line (the URL masked),
nothing is half-written, and once the server is back the same store goes on with everything it had, and
delivery, started again after its failure, sends what waited. A real server of the test's own, stopped and
started by its pid."""

from __future__ import annotations

import asyncio

import pytest

from tests.fixtures import postgres
from watchtower.adapters.store.url import masked
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.runtime.leader_jobs import again_after_failure

pytest.importorskip("psycopg", reason="PostgreSQL cannot run here: psycopg is not installed")
from watchtower.adapters.store.postgres import PostgresAlertStore, StoreConnectError  # noqa: E402

NOW = 1_800_000_000.0
OPS = "ops/webhook/0"


@pytest.fixture
def own_server():
    try:
        server = postgres.start()
    except postgres.Unavailable as e:
        pytest.skip(f"PostgreSQL cannot run here: {e}")
    yield server
    server.stop()


def _msg(key: str):
    return (
        OutboxMessage(0, key, OPS, key, {"version": "4"}, NOW, next_attempt=NOW),
        OPS,
        key,
        NotifyEntry(frozenset({key}), frozenset(), NOW),
    )


def test_a_database_that_goes_away_and_comes_back(own_server):
    url = own_server.url(own_server.database(), with_password=True)
    store = PostgresAlertStore(url)
    store.enqueue([_msg("before")])
    own_server.halt()
    with pytest.raises(StoreConnectError) as e:
        store.enqueue([_msg("during")])
    assert str(e.value).startswith(f"the alert store {masked(url)} failed: ")
    assert postgres.PASSWORD not in str(e.value)
    with pytest.raises(StoreConnectError, match="cannot open the alert store"):
        store.depth()  # still down: reconnecting fails, as clearly
    own_server.launch()
    assert store.depth() == {OPS: 1}  # the same store, connected again; "during" was never stored
    assert [m.key for m in store.due(NOW)] == ["before"]
    store.close()


async def test_delivery_that_failed_on_the_store_starts_again_and_drains_once_it_is_back(own_server):
    url = own_server.url(own_server.database(), with_password=True)
    store = PostgresAlertStore(url)
    store.enqueue([_msg("waited")])
    own_server.halt()
    sent: list[str] = []
    failures = 0

    async def drain() -> None:
        nonlocal failures
        try:
            while store.depth():
                for m in store.due(NOW):
                    store.begin_attempt(m.id, NOW)
                    sent.append(m.key)
                    store.delivered(m.id, NOW)
        except StoreConnectError:
            failures += 1
            if failures == 2:
                await asyncio.to_thread(own_server.launch)  # the database is back for the third run
            raise

    await asyncio.wait_for(again_after_failure(drain, "delivery", pause=0.05), timeout=60)
    assert failures == 2 and sent == ["waited"]
    store.close()
