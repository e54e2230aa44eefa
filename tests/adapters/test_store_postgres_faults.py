"""PostgreSQL failing the way it really does, under the real delivery worker: the store reaches a real server
of the test's own through the fault proxy (tests/faults/proxy.py), and a real webhook receiver counts what
arrives. Two faults in one run:

- the connection cut (TCP reset) while the store marks a message delivered (its answers held a second, the
  cut 0.3 s in): the transaction is lost with the connection;
- the server stopped while a message is claimed and being sent, and started again a few seconds later.

Delivery is run as the service runs it (`again_after_failure`): a store call that meets the fault fails the
pass, which starts again on a reconnected store; no restart of anything else. What holds: every message
arrives, in order; a message arrives twice only under the same id, and only the one each fault caught
between the receiver's answer and the commit recording it; nothing is marked failed.

A second test: a leader's delivery cancelled mid-send (as the service cancels the leader's jobs when the
Lease is lost) releases its claim, so the next leader's session takes the message at once.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

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
from watchtower.services.alerting import DeliveryWorker, delivery

pytest.importorskip("psycopg", reason="PostgreSQL cannot run here: psycopg is not installed")
from watchtower.adapters.store.postgres import PostgresAlertStore  # noqa: E402

INTEGRATION = "ops/webhook/0"
MESSAGES = 8
CUT_AT, RESTART_AT = 2, 5  # the arrivals (1-based) at which each fault strikes


@pytest.fixture
def own_server() -> Iterator[postgres.PostgresServer]:
    try:
        server = postgres.start()
    except postgres.Unavailable as e:
        pytest.skip(f"PostgreSQL cannot run here: {e}")
    yield server
    server.stop()


def test_a_cut_during_the_commit_and_a_restart_mid_claim_lose_nothing(
    own_server: postgres.PostgresServer,
) -> None:
    db = own_server.database()
    proxy = FaultProxy(own_server.port).start()
    url = own_server.url(db, with_password=True).replace(f":{own_server.port}/", f":{proxy.port}/")
    faults: list[tuple[str, float]] = []
    caught: list[str] = []  # the message each fault struck while it was being delivered

    def on_arrival(n: int, key: str) -> None:
        if n in (CUT_AT, RESTART_AT):
            caught.append(key)
        if n == CUT_AT:
            # The receiver answers now; the store's commit of "delivered" follows at once. Its answer is
            # held, and the connection is cut while it is held: the server has the commit, we do not.
            proxy.latency(1.0)
            threading.Timer(
                0.3, lambda: (proxy.reset(), proxy.latency(0.0), faults.append(("cut", time.time())))
            ).start()
        elif n == RESTART_AT:
            own_server.halt()  # mid-claim: the message is claimed and being sent
            faults.append(("halt", time.time()))
            threading.Timer(3.0, lambda: (own_server.launch(), faults.append(("back", time.time())))).start()

    receiver = Receiver(on_arrival)
    store = PostgresAlertStore(url, connect_timeout=2.0)
    try:
        now = time.time()
        keys = [f"msg-{i}" for i in range(MESSAGES)]
        store.enqueue(
            (
                OutboxMessage(0, key, INTEGRATION, key, {"alerts": [], "n": i}, now, next_attempt=now),
                INTEGRATION,
                key,
                NotifyEntry(frozenset(), frozenset(), now),
            )
            for i, key in enumerate(keys)
        )
        cfg = settings_from_mapping(
            {
                "alerting": {
                    "route": {"receiver": "ops"},
                    "receivers": [{"name": "ops", "webhooks": [{"url": receiver.url, "timeout": "2s"}]}],
                    "delivery": {"backoff_base": "0.2s", "backoff_cap": "1s", "jitter": 0},
                }
            },
            env={},
        ).alerting
        rows, took = asyncio.run(_deliver(cfg, store))
    finally:
        receiver.stop()
        store.close()
        proxy.stop()
    seen = receiver.received()
    twice = sorted(k for k in set(seen) if seen.count(k) > 1)
    print(
        f"\nPostgreSQL faults {[f for f, _ in faults]}: {len(seen)} arrivals for {MESSAGES} messages, sent twice: {twice} (the faults caught {caught}), all delivered in {took:.1f}s"
    )
    assert [f for f, _ in faults] == ["cut", "halt", "back"], faults
    assert list(dict.fromkeys(seen)) == keys, "every message arrived, in order"
    assert {m.key: m.status for m in rows} == dict.fromkeys(keys, OutboxStatus.DELIVERED)
    # Each fault struck between the receiver's answer and the commit that records it: that message (and
    # only it) may go again, under its own id, never a third time. Receivers tell it by its webhook-id.
    assert set(twice) <= set(caught), (twice, caught)
    assert all(seen.count(k) <= 2 for k in twice), seen


async def _deliver(cfg: Any, store: PostgresAlertStore) -> tuple[list[Any], float]:
    started = time.monotonic()
    async with httpx.AsyncClient() as http:
        worker = DeliveryWorker(
            store=store, senders=build_senders(cfg, http=http), clock=SystemClock(), cfg=cfg
        )

        async def deliver() -> None:  # as runtime/delivery.py runs it: a failed pass starts again
            await again_after_failure(worker.run, "delivery", pause=0.2)

        task = asyncio.create_task(deliver())
        try:
            deadline = time.monotonic() + 60
            while True:
                try:
                    rows = await asyncio.to_thread(store.messages, limit=100)
                    if rows and all(m.status is OutboxStatus.DELIVERED for m in rows):
                        break
                except Exception:  # the database is away for a moment: ask again
                    pass
                assert time.monotonic() < deadline, "not everything delivered within 60 s"
                await asyncio.sleep(0.2)
        finally:
            worker.stop()
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
    return rows, time.monotonic() - started


def test_a_leader_whose_delivery_is_cancelled_mid_send_leaves_the_message_to_the_next_one_at_once(
    own_server: postgres.PostgresServer,
) -> None:
    """Two stores are two replicas' sessions. Replica A's worker is cancelled while its receiver holds the
    first message (as the service cancels the leader's jobs when it stops leading); A's process, and so its
    database session, lives on. Replica B must get that message at its first look, not after A's claim
    runs out (`store.claim_for`, 2 min), which held the integration's whole queue before."""
    url = own_server.url(own_server.database(), with_password=True)
    holding = threading.Event()
    release = threading.Event()

    def on_arrival(n: int, key: str) -> None:
        holding.set()
        release.wait(30)

    receiver = Receiver(on_arrival)
    a, b = PostgresAlertStore(url), PostgresAlertStore(url)
    try:
        now = time.time()
        a.enqueue(
            (
                OutboxMessage(0, key, INTEGRATION, key, {"alerts": [], "n": i}, now, next_attempt=now),
                INTEGRATION,
                key,
                NotifyEntry(frozenset(), frozenset(), now),
            )
            for i, key in enumerate(("first", "second"))
        )
        cfg = settings_from_mapping(
            {
                "alerting": {
                    "route": {"receiver": "ops"},
                    "receivers": [{"name": "ops", "webhooks": [{"url": receiver.url, "timeout": "20s"}]}],
                }
            },
            env={},
        ).alerting

        async def lead_then_lose() -> None:
            async with httpx.AsyncClient() as http:
                worker = DeliveryWorker(
                    store=a, senders=build_senders(cfg, http=http), clock=SystemClock(), cfg=cfg
                )
                task = asyncio.create_task(worker.run())
                assert await asyncio.to_thread(holding.wait, 20), (
                    "the first message never reached the receiver"
                )
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        asyncio.run(lead_then_lose())
        taken = [m.key for m in b.due(time.time())]
    finally:
        release.set()
        receiver.stop()
        a.close()
        b.close()
    assert taken == ["first"], "the next leader must not wait for the claim of a replica that stopped"


def test_a_batched_lane_cancelled_mid_send_leaves_the_whole_batch_to_the_next_leader_at_once(
    own_server: postgres.PostgresServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above, on a lane that sends in batches (the owner notices' lanes, `BATCHED`; here the webhook lane
    is made one so the test's receiver can hold the batch's first message). The batch claimed all three
    messages; cancelled, every claim goes, so the next leader's session takes the head and the two after it
    at once instead of after `store.claim_for`."""
    monkeypatch.setattr(delivery, "BATCHED", (INTEGRATION,))
    url = own_server.url(own_server.database(), with_password=True)
    holding = threading.Event()
    release = threading.Event()

    def on_arrival(n: int, key: str) -> None:
        holding.set()
        release.wait(30)

    receiver = Receiver(on_arrival)
    a, b = PostgresAlertStore(url), PostgresAlertStore(url)
    keys = ("first", "second", "third")
    try:
        now = time.time()
        a.enqueue(
            (
                OutboxMessage(0, key, INTEGRATION, key, {"alerts": [], "n": i}, now, next_attempt=now),
                INTEGRATION,
                key,
                NotifyEntry(frozenset(), frozenset(), now),
            )
            for i, key in enumerate(keys)
        )
        cfg = settings_from_mapping(
            {
                "alerting": {
                    "route": {"receiver": "ops"},
                    "receivers": [{"name": "ops", "webhooks": [{"url": receiver.url, "timeout": "20s"}]}],
                }
            },
            env={},
        ).alerting

        async def lead_then_lose() -> None:
            async with httpx.AsyncClient() as http:
                worker = DeliveryWorker(
                    store=a, senders=build_senders(cfg, http=http), clock=SystemClock(), cfg=cfg
                )
                task = asyncio.create_task(worker.run())
                assert await asyncio.to_thread(holding.wait, 20), (
                    "the first message never reached the receiver"
                )
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

        asyncio.run(lead_then_lose())
        heads = b.due(time.time())
        after = b.following(heads[0], time.time(), 10) if heads else []
    finally:
        release.set()
        receiver.stop()
        a.close()
        b.close()
    assert [m.key for m in heads] == ["first"], "the next leader must not wait for a cancelled batch's claims"
    assert [m.key for m in after] == ["second", "third"]
    assert all(m.attempts == 0 for m in after), "an attempt never made must not count"
