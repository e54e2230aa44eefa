"""Receivers that answer slowly rather than not at all, against the real delivery worker and senders:

- an SMTP server (real aiosmtpd) behind the fault proxy, which accepts the connection and then carries
  nothing (blackhole): no greeting ever comes;
- a webhook receiver (a real HTTP server) that answers after 60 s;
- a prompt webhook receiver beside them.

What must hold while they hang: each attempt is bounded by its receiver's `timeout`; the prompt receiver
is not held behind the slow ones; the event loop (which the tick and the API share with delivery in the
service) never stalls. Once healed: nothing lost, nothing failed, each receiver's messages in the order they
were queued, and a message seen twice only as a resend under the same id (a receiver that took the request
but answered too late).
"""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.alerting.alertmanager import Alertmanager
from tests.alerting.servers import plain_smtp_server
from tests.faults.proxy import FaultProxy
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.senders import build_senders
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.config import settings_from_mapping
from watchtower.domain.alerts.gotext import rfc3339nano
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage, OutboxStatus
from watchtower.domain.alerts.push import VALID_FOR
from watchtower.services.alerting import DeliveryWorker

PER_RECEIVER = 5
TIMEOUT = 2.0  # each receiver's timeout: what bounds an attempt
FAULT = 8.0  # how long the slow receivers hang before they heal


@dataclass
class SleepyReceiver:
    """A webhook receiver that records each request's webhook-id as it arrives, then answers after `delay`
    seconds (a real server: the client's timeout, not the receiver, must end the wait)."""

    delay: float = 0.0
    arrivals: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    receiver.arrivals.append(self.headers.get("webhook-id", ""))
                delay = receiver.delay
                if delay:
                    time.sleep(delay)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.server.block_on_close = False  # a request still asleep must not hold the test's end
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def seen(self) -> list[str]:
        with self.lock:
            return list(self.arrivals)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receivers() -> Iterator[tuple[FaultProxy, Any, SleepyReceiver, SleepyReceiver]]:
    smtp, inbox = plain_smtp_server()
    proxy = FaultProxy(smtp.port).start()
    slow, prompt = SleepyReceiver(), SleepyReceiver()
    try:
        yield proxy, inbox, slow, prompt
    finally:
        proxy.stop()
        smtp.stop()
        slow.stop()
        prompt.stop()


def _cfg(proxy: FaultProxy, slow: SleepyReceiver, prompt: SleepyReceiver) -> Any:
    return settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": "mail"},
                "receivers": [
                    {
                        "name": "mail",
                        "email": [
                            {
                                "to": ["oncall@example.com"],
                                "smarthost": "127.0.0.1",
                                "port": proxy.port,
                                "security": "none",
                                "timeout": f"{TIMEOUT}s",
                                "deadline": f"{3 * TIMEOUT}s",
                            }
                        ],
                    },
                    {"name": "slow", "webhooks": [{"url": slow.url, "timeout": f"{TIMEOUT}s"}]},
                    {"name": "prompt", "webhooks": [{"url": prompt.url, "timeout": f"{TIMEOUT}s"}]},
                ],
                "delivery": {"backoff_base": "0.2s", "backoff_cap": "1s", "jitter": 0},
            }
        },
        env={},
    ).alerting


INTEGRATIONS = ("mail/email/0", "slow/webhook/0", "prompt/webhook/0")
PROMPT = INTEGRATIONS[2]


def _enqueue(store: SQLiteAlertStore, integration: str, n: int) -> str:
    now = time.time()
    key = f"{integration.split('/')[0]}-{n}"
    payload = {"alerts": [], "n": n, "groupLabels": {}, "commonLabels": {}, "status": "firing"}
    msg = OutboxMessage(0, key, integration, f"group-{n}", payload, now, next_attempt=now)
    store.enqueue([(msg, integration, f"group-{n}", NotifyEntry(frozenset(), frozenset(), now))])
    return key


def test_hanging_receivers_are_bounded_by_their_timeouts_hold_nobody_else_and_lose_nothing(
    receivers: tuple[FaultProxy, Any, SleepyReceiver, SleepyReceiver], tmp_path: Path
) -> None:
    proxy, inbox, slow, prompt = receivers
    proxy.blackhole()  # SMTP: the connection is accepted, the greeting never comes
    slow.delay = 60.0
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    try:
        keys = {i: [_enqueue(store, i, n) for n in range(PER_RECEIVER)] for i in INTEGRATIONS[:2]}
        keys[PROMPT] = []
        lag, waits, attempts = asyncio.run(
            _deliver(_cfg(proxy, slow, prompt), store, proxy, slow, prompt, keys[PROMPT])
        )
        rows = store.messages(limit=10 * PER_RECEIVER)
    finally:
        store.close()
    print(
        f"\nwhile hanging: loop lag max {lag * 1000:.0f} ms; the prompt receiver's messages queued during the"
        f" fault arrived after {', '.join(f'{w:.2f}' for w in waits)} s; attempts during the fault: {attempts}"
    )
    # A send that blocked the loop would show as a lag of a whole timeout; a loaded 2-core machine (load 12
    # measured while other suites ran) adds up to a few hundred ms of scheduling by itself.
    assert lag < TIMEOUT / 4, "the event loop (the tick's and the API's) stalled while receivers hung"
    assert len(waits) == PER_RECEIVER and max(waits) < TIMEOUT / 2, (
        "the prompt receiver waited behind the slow ones"
    )
    # Each hanging attempt ended at its timeout: several per receiver in the fault's few seconds.
    assert attempts["mail/email/0"] >= 2 and attempts["slow/webhook/0"] >= 2, attempts

    assert {m.status for m in rows} == {OutboxStatus.DELIVERED}, [(m.key, m.status) for m in rows]
    mailed = [m["Subject"] for m in inbox.parsed()]
    assert len(mailed) == PER_RECEIVER, mailed  # the blackholed SMTP never took a message: no duplicate
    for integration, receiver in (("slow/webhook/0", slow), (PROMPT, prompt)):
        seen = receiver.seen()
        first_seen = list(dict.fromkeys(seen))
        assert first_seen == keys[integration], "in the order queued, none lost"
        assert set(seen) == set(keys[integration]), "a second arrival is a resend under the same id"
    assert prompt.seen() == keys[PROMPT], "the prompt receiver got each exactly once"


async def _deliver(
    cfg: Any,
    store: SQLiteAlertStore,
    proxy: FaultProxy,
    slow: SleepyReceiver,
    prompt: SleepyReceiver,
    prompt_keys: list[str],
) -> tuple[float, list[float], dict[str, int]]:
    lag = 0.0
    stop = asyncio.Event()

    async def probe() -> None:  # what the tick and the API would feel: how late a 50 ms sleep wakes
        nonlocal lag
        while not stop.is_set():
            t0 = time.monotonic()
            await asyncio.sleep(0.05)
            lag = max(lag, time.monotonic() - t0 - 0.05)

    waits: list[float] = []
    async with httpx.AsyncClient() as http:
        worker = DeliveryWorker(
            store=store, senders=build_senders(cfg, http=http), clock=SystemClock(), cfg=cfg
        )
        started = time.monotonic()
        tasks = [asyncio.create_task(worker.run()), asyncio.create_task(probe())]
        try:
            await asyncio.sleep(0.5)  # the slow receivers' first attempts are under way
            for n in range(PER_RECEIVER):  # queued one by one while they hang, as an evaluation would
                queued = time.monotonic()
                prompt_keys.append(await asyncio.to_thread(_enqueue, store, PROMPT, n))
                worker.wake.set()
                while len(prompt.seen()) <= n and time.monotonic() - queued < 2 * TIMEOUT:
                    await asyncio.sleep(0.01)
                waits.append(time.monotonic() - queued)
                await asyncio.sleep(0.7)
            await asyncio.sleep(max(0.0, FAULT - (time.monotonic() - started)))
            during = await asyncio.to_thread(store.messages, limit=100)
            attempts = {i: max(m.attempts for m in during if m.integration == i) for i in INTEGRATIONS}
            lag_during = lag
            proxy.heal()
            slow.delay = 0.0
            deadline = time.monotonic() + 30
            while any(m.status is not OutboxStatus.DELIVERED for m in store.messages(limit=100)):
                assert time.monotonic() < deadline, "not everything delivered 30 s after healing"
                worker.wake.set()
                await asyncio.sleep(0.1)
        finally:
            worker.stop()
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
    return lag_during, waits, attempts


def test_a_slow_alertmanager_is_bounded_by_the_push_timeout_holds_no_receiver_and_gets_every_alert(
    receivers: tuple[FaultProxy, Any, SleepyReceiver, SleepyReceiver], tmp_path: Path
) -> None:
    """Debian's real Alertmanager behind a second fault proxy that holds its answers 5 s (the push's
    timeout is 2 s); a prompt webhook beside it. Healed, Alertmanager has every pushed alert."""
    _, _, _, prompt = receivers
    exe = shutil.which("prometheus-alertmanager")
    if exe is None:
        pytest.fail("prometheus-alertmanager not installed: run tests/setup/system-deps.sh")
    config = tmp_path / "am.yml"
    config.write_text("route: {receiver: none}\nreceivers: [{name: none}]\n")
    am = Alertmanager(exe, config, tmp_path / "am").start()
    am_proxy = FaultProxy(am.port).start()
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    try:
        cfg = settings_from_mapping(
            {
                "alerting": {
                    "route": {"receiver": "prompt"},
                    "receivers": [
                        {"name": "prompt", "webhooks": [{"url": prompt.url, "timeout": f"{TIMEOUT}s"}]}
                    ],
                    "alertmanagers": [f"http://127.0.0.1:{am_proxy.port}"],
                    "delivery": {"mode": "both", "backoff_base": "0.2s", "backoff_cap": "1s", "jitter": 0},
                    "push": {"timeout": f"{TIMEOUT}s"},
                }
            },
            env={},
        ).alerting
        push = "alertmanager/push/0"
        am_proxy.latency(5.0)
        now = time.time()
        for n in range(PER_RECEIVER):
            alert = {
                "labels": {"alertname": "SlowPush", "n": str(n)},
                "annotations": {},
                "startsAt": rfc3339nano(now),
                VALID_FOR: 600,
            }
            msg = OutboxMessage(0, f"push-{n}", push, "push", {"alerts": [alert]}, now, next_attempt=now)
            store.enqueue([(msg, push, "push", NotifyEntry(frozenset(), frozenset(), now))])
        prompt_keys: list[str] = []
        lag, waits, attempts = asyncio.run(
            _deliver_beside(cfg, store, prompt, prompt_keys, heal=lambda: am_proxy.heal(), slow=push)
        )
        print(
            f"\nAlertmanager 5 s late: loop lag max {lag * 1000:.0f} ms; the prompt receiver's messages arrived"
            f" after {', '.join(f'{w:.2f}' for w in waits)} s; push attempts during the fault: {attempts}"
        )
        assert lag < TIMEOUT / 4  # see the test above
        assert max(waits) < TIMEOUT / 2, waits
        assert attempts >= 2, "each push attempt ends at the push timeout"
        got = httpx.get(am.url + "/api/v2/alerts", params={"filter": 'alertname="SlowPush"'}).json()
        assert sorted(a["labels"]["n"] for a in got) == [str(n) for n in range(PER_RECEIVER)], got
        assert {m.status for m in store.messages(limit=100)} == {OutboxStatus.DELIVERED}
    finally:
        store.close()
        am_proxy.stop()
        am.stop()


async def _deliver_beside(
    cfg: Any,
    store: SQLiteAlertStore,
    prompt: SleepyReceiver,
    prompt_keys: list[str],
    *,
    heal: Any,
    slow: str,
) -> tuple[float, list[float], int]:
    lag = 0.0
    stop = asyncio.Event()

    async def probe() -> None:
        nonlocal lag
        while not stop.is_set():
            t0 = time.monotonic()
            await asyncio.sleep(0.05)
            lag = max(lag, time.monotonic() - t0 - 0.05)

    waits: list[float] = []
    async with httpx.AsyncClient() as http:
        worker = DeliveryWorker(
            store=store, senders=build_senders(cfg, http=http), clock=SystemClock(), cfg=cfg
        )
        started = time.monotonic()
        tasks = [asyncio.create_task(worker.run()), asyncio.create_task(probe())]
        try:
            await asyncio.sleep(0.5)
            for n in range(PER_RECEIVER):
                queued = time.monotonic()
                prompt_keys.append(await asyncio.to_thread(_enqueue, store, "prompt/webhook/0", n))
                worker.wake.set()
                while len(prompt.seen()) <= n and time.monotonic() - queued < 2 * TIMEOUT:
                    await asyncio.sleep(0.01)
                waits.append(time.monotonic() - queued)
                await asyncio.sleep(0.7)
            await asyncio.sleep(max(0.0, FAULT - (time.monotonic() - started)))
            during = await asyncio.to_thread(store.messages, limit=100)
            attempts = max(m.attempts for m in during if m.integration == slow)
            lag_during = lag
            heal()
            deadline = time.monotonic() + 30
            while any(m.status is not OutboxStatus.DELIVERED for m in store.messages(limit=100)):
                assert time.monotonic() < deadline, "not everything delivered 30 s after healing"
                worker.wake.set()
                await asyncio.sleep(0.1)
        finally:
            worker.stop()
            stop.set()
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 10)
    return lag_during, waits, attempts
