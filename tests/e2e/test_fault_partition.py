"""The leader cut off from the API server but not from its receivers: two electors and two delivery workers
(one per replica, sharing the outbox as replicas share PostgreSQL) against the real API server, the
leader's Lease calls through the fault proxy (tests/faults/proxy.py), a real webhook receiver that tells the
replicas apart by a header. The proxy partitions the leader (new connections refused, open ones carry
nothing): it must stop delivering at its renew deadline, before the other may take the Lease; the other
takes over and delivers the rest; nothing is lost, and a message arrives twice only under its own id. Healed,
the old leader follows.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.failover import lease_of
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.scenario import Scenario
from tests.e2e.webhooks import HookReceiver, new_secret
from tests.faults.proxy import FaultProxy
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.kube.connection import api_client
from watchtower.adapters.kube.lease import LeaseClient
from watchtower.adapters.senders import build_senders
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.config import settings_from_mapping
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage, OutboxStatus
from watchtower.domain.leader import Timings
from watchtower.services.alerting import DeliveryWorker
from watchtower.services.leadership import LeaderElector

pytestmark = pytest.mark.e2e

HOME = "e2e-partition-home"
TIMINGS = Timings(lease_duration=4, renew_deadline=3, retry_period=1)
INTEGRATION = "oncall/webhook/0"
MESSAGES = 30


def _elector(kubeconfig: Path, identity: str) -> LeaderElector:
    client = api_client(kubeconfig=str(kubeconfig), context=None)
    lease = LeaseClient(client, name="watchtower", namespace=HOME, timeout=2.0)
    return LeaderElector(api=lease, identity=identity, timings=TIMINGS, clock=SystemClock())


async def _until(what: str, probe, timeout: float) -> float:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.time()


def test_a_leader_partitioned_from_the_api_server_stops_before_the_other_leads_and_nothing_is_lost(
    scenario: Scenario, control_plane: ControlPlane, tmp_path: Path
) -> None:
    s = scenario
    s.namespace(HOME)
    identity = apply_rbac(s.api, namespace=HOME, suffix="-e2e-partition")
    proxy = FaultProxy(int(urlsplit(control_plane.url).port or 443)).start()
    hooks = HookReceiver(new_secret(), delay=0.2).start()
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    try:
        token, ca = identity.token(), control_plane.pki.ca_cert
        kube_a = token_kubeconfig(
            tmp_path / "a.kubeconfig", server=f"https://127.0.0.1:{proxy.port}", ca=ca, token=token
        )
        kube_b = token_kubeconfig(tmp_path / "b.kubeconfig", server=control_plane.url, ca=ca, token=token)
        asyncio.run(_scenario(s, kube_a, kube_b, proxy, hooks, store))
    finally:
        store.close()
        hooks.stop()
        proxy.stop()
        identity.remove()


async def _scenario(
    s: Scenario, kube_a: Path, kube_b: Path, proxy: FaultProxy, hooks: HookReceiver, store: SQLiteAlertStore
) -> None:
    a, b = _elector(kube_a, "replica-a"), _elector(kube_b, "replica-b")
    assert await a.try_once() is not None and a.holds_now()
    runs = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    lost: list[float] = []
    a.on_change = lambda leading: None if leading else lost.append(time.time())
    cfg = settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": "oncall"},
                "receivers": [{"name": "oncall", "webhooks": [{"url": hooks.url, "secret": hooks.secret}]}],
                "delivery": {"backoff_base": "0.2s", "backoff_cap": "1s"},
            }
        },
        env={},
    ).alerting
    now = time.time()
    store.enqueue(
        (
            OutboxMessage(
                0, f"key-{i:02d}", INTEGRATION, f"g-{i}", {"alerts": [], "n": i}, now, next_attempt=now
            ),
            INTEGRATION,
            f"g-{i}",
            NotifyEntry(frozenset(), frozenset(), now),
        )
        for i in range(MESSAGES)
    )
    async with (
        httpx.AsyncClient(headers={"x-replica": "a"}) as http_a,
        httpx.AsyncClient(headers={"x-replica": "b"}) as http_b,
    ):
        workers = [
            DeliveryWorker(
                store=store, senders=build_senders(cfg, http=h), clock=SystemClock(), cfg=cfg, fence=f
            )
            for h, f in ((http_a, a), (http_b, b))
        ]
        delivering = [asyncio.create_task(w.run()) for w in workers]
        try:
            await _until("5 messages delivered", lambda: len(hooks.received()) >= 5, timeout=30)
            proxy.partition()  # replica-a reaches its receivers, not the API server
            partitioned = time.time()
            stopped = await _until("replica-a to stop leading", lambda: not a.holds_now(), timeout=15)
            taken = await _until("replica-b to lead", b.holds_now, timeout=20)
            await _until(
                "every message delivered",
                lambda: all(m.status is OutboxStatus.DELIVERED for m in store.messages(limit=MESSAGES)),
                timeout=60,
            )
            proxy.heal()
            await asyncio.sleep(3 * TIMINGS.retry_period)  # the old leader reads the Lease again
            assert not a.holds_now() and b.holds_now(), "healed, the old leader must follow"
        finally:
            for w in workers:
                w.stop()
            for t in [*delivering, *runs]:
                t.cancel()
            await asyncio.gather(*delivering, *runs, return_exceptions=True)
            a.close()
            b.close()

    got = hooks.received()
    by_a_late = [d.webhook_id for d in got if d.headers.get("x-replica") == "a" and d.arrived > stopped + 0.1]
    twice = {k: n for k, n in Counter(d.webhook_id for d in got).items() if n > 1}
    print(
        f"\npartition: replica-a stopped {stopped - partitioned:.1f}s after it, replica-b led"
        f" {taken - stopped:.1f}s later; {len(got)} arrivals for {MESSAGES} messages, twice: {sorted(twice)}"
    )
    assert stopped - partitioned <= TIMINGS.renew_deadline + TIMINGS.retry_period + 0.5
    assert lost and stopped < taken, "the partitioned leader must stop before the other leads"
    assert by_a_late == [], "replica-a sent after it stopped leading"
    assert {d.webhook_id for d in got} == {f"key-{i:02d}" for i in range(MESSAGES)}, "nothing lost"
    assert all(n == 2 for n in twice.values()) and len(twice) <= 1, twice  # a resend under the same id
    assert not [d for d in got if d.problem], "every delivery signed"
    lease = lease_of(s.api, HOME)
    assert lease["holderIdentity"] == "replica-b" and lease["leaseTransitions"] == 1
