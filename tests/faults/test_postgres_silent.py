"""A PostgreSQL connection that stays open and carries nothing (the fault proxy's blackhole, not a reset),
under the real delivery worker: a store of the test's own PostgreSQL server reached through the fault proxy
(tests/faults/proxy.py), a real webhook receiver counting what arrives.

Without a bound, a call on such a connection waits for the kernel (hours) with the store's lock held: the
delivery stops, and every other user of the store (the alerting service, the fairness recorder) queues
behind it. What holds: the call under way fails within `store.timeout` and its grace, saying why; the
delivery starts again by itself (`again_after_failure`) and, once the proxy heals, delivers the rest: nothing
lost, nothing sent twice but under its own id. (The server's side, a silent session's transaction ended at
`idle_in_transaction_session_timeout`, is shown by test_postgres_silent_migration.py.)
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from tests.faults.hooks import IdReceiver as Receiver
from tests.faults.proxy import FaultProxy
from tests.fixtures import postgres
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.senders import build_senders
from watchtower.config import settings_from_mapping
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage, OutboxStatus
from watchtower.runtime.leader_jobs import again_after_failure
from watchtower.services.alerting import DeliveryWorker

psycopg = pytest.importorskip("psycopg", reason="PostgreSQL cannot run here: psycopg is not installed")
from watchtower.adapters.store.postgres import PostgresAlertStore, StoreConnectError  # noqa: E402

INTEGRATION = "ops/webhook/0"
MESSAGES = 8
SILENT_AT = 3  # the arrival (1-based) after which the store's connection goes silent
TIMEOUT = 3.0  # store.timeout of the test; the client adds a 2 s grace
HEAL_AFTER = 9.0  # past the first call's bound and a reconnection's (connect_timeout 2 s)


@pytest.fixture
def own_server() -> Iterator[postgres.PostgresServer]:
    try:
        server = postgres.start()
    except postgres.Unavailable as e:
        pytest.skip(f"PostgreSQL cannot run here: {e}")
    yield server
    server.stop()


def test_a_silent_connection_is_cut_within_the_bound_and_the_call_says_why(
    own_server: postgres.PostgresServer,
) -> None:
    db = own_server.database()
    direct = own_server.url(db, with_password=True)
    with FaultProxy(own_server.port) as proxy:
        store = PostgresAlertStore(direct.replace(f":{own_server.port}/", f":{proxy.port}/"), timeout=TIMEOUT)
        try:
            assert store.due(time.time()) == []
            proxy.blackhole(new=False)
            began = time.monotonic()
            with pytest.raises(StoreConnectError) as caught:
                store.due(time.time())
            took = time.monotonic() - began
            proxy.heal()
            assert caught.value.transient, "a silent connection is a lost one: worth trying again"
            assert "no answer within 3s" in str(caught.value)
            print(f"\na call on a silent connection cut after {took:.1f}s (store.timeout {TIMEOUT:g}s)")
            assert TIMEOUT + 1.5 < took < TIMEOUT + 4, f"cut after {took:.1f}s"
            assert store.due(time.time()) == [], "the next call reconnects"
        finally:
            store.close()


def test_deliveries_resume_after_the_store_connection_went_silent_and_nothing_is_lost(
    own_server: postgres.PostgresServer, caplog: pytest.LogCaptureFixture
) -> None:
    db = own_server.database()
    direct = own_server.url(db, with_password=True)
    proxy = FaultProxy(own_server.port).start()
    silenced: dict[str, float] = {}
    healed: dict[str, float] = {}

    def on_arrival(n: int, key: str) -> None:
        if n == SILENT_AT:
            # The worker's next store call (marking this message delivered) meets a silent connection.
            proxy.blackhole(new=True)
            silenced["at"], silenced["wall"] = time.monotonic(), time.time()
            threading.Timer(HEAL_AFTER, heal).start()

    def heal() -> None:
        proxy.heal()
        healed["at"] = time.monotonic()

    hooks = Receiver(on_arrival)
    settings = settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": "ops"},
                "receivers": [{"name": "ops", "webhooks": [{"url": hooks.url, "timeout": "2s"}]}],
                "delivery": {"backoff_base": "0.2s", "backoff_cap": "1s", "jitter": 0},
            }
        },
        env={},
    )
    store = PostgresAlertStore(  # connect_timeout: each reconnection through the silent path
        direct.replace(f":{own_server.port}/", f":{proxy.port}/"), timeout=TIMEOUT, connect_timeout=2
    )
    now = time.time()
    keys = [f"silent-{i}" for i in range(MESSAGES)]
    store.enqueue(
        (
            OutboxMessage(0, key, INTEGRATION, key, {"alerts": [], "n": i}, now, next_attempt=0.0),
            INTEGRATION,
            key,
            NotifyEntry(frozenset(), frozenset(), now),
        )
        for i, key in enumerate(keys)
    )
    cfg = settings.alerting
    done: dict[str, float] = {}

    async def run() -> None:
        async with httpx.AsyncClient() as http:
            worker = DeliveryWorker(
                store=store, senders=build_senders(cfg, http=http), clock=SystemClock(), cfg=cfg
            )
            job = asyncio.create_task(again_after_failure(worker.run, "delivery", pause=0.2))
            try:
                deadline = time.monotonic() + 60
                while not set(keys) <= set(hooks.received()):
                    assert time.monotonic() < deadline, f"not all delivered: {hooks.received()}"
                    await asyncio.sleep(0.05)
                done["at"] = time.monotonic()
                await asyncio.sleep(1.5)  # a second delivery of any would have arrived by now
            finally:
                job.cancel()
                await asyncio.gather(job, return_exceptions=True)

    try:
        asyncio.run(run())
        rows = {m.key: m.status for m in store.messages(limit=100)}
    finally:
        store.close()
        hooks.stop()
        proxy.stop()
    got = hooks.received()
    # The call cut is the lane's (marking message 3 delivered); the delivery's next claim, waiting behind
    # it for the store's lock, then meets the silent path again while reconnecting, and the pass fails
    # with whichever of the two it raises first.
    logged = [r for r in caplog.records if r.levelno >= 30]
    failures = [r.getMessage() for r in logged]
    noticed = logged[0].created - silenced["wall"] if logged else float("nan")
    print(
        f"\nstore connection silent after arrival {SILENT_AT}: {len(failures)} failure(s), first: "
        f"{failures[0] if failures else None!r} {noticed:.1f}s in; healed {healed['at'] - silenced['at']:.1f}s in; "
        f"all delivered {done['at'] - healed['at']:.1f}s after; {len(got)} arrivals for {MESSAGES} messages"
    )
    assert any("no answer within 3s" in f or "connection timeout expired" in f for f in failures), failures
    assert noticed < TIMEOUT + 2 + 2 + 1.5, "the delivery noticed the silence within the bounds"
    assert set(got) == set(keys), "nothing lost"
    assert [k for k in dict.fromkeys(got)] == keys, "in order"
    assert len(got) - len(set(got)) <= 1, "at most the message the silence caught is sent again (same id)"
    assert rows == dict.fromkeys(keys, OutboxStatus.DELIVERED)
