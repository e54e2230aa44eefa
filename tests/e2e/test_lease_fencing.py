"""The election loop and the fence against the real API server, in one process: two electors race for one
Lease (one wins; the other's write gets 409), and a leader that can no longer renew (its RoleBinding
deleted, so the server refuses it) stops leading at its renew deadline, before anyone may take over, and
its delivery worker, mid-storm towards a slow real receiver, sends nothing after that: the rest stays
pending in the outbox, not failed.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx
import pytest

from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.failover import lease_of
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.scenario import Scenario
from tests.e2e.webhooks import HookReceiver, new_secret
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

HOME = "e2e-fence-home"
TIMINGS = Timings(lease_duration=4, renew_deadline=3, retry_period=1)
INTEGRATION = "oncall/webhook/0"
MESSAGES = 30


def _elector(kubeconfig: Path, identity: str) -> LeaderElector:
    client = api_client(kubeconfig=str(kubeconfig), context=None)
    lease = LeaseClient(client, name="watchtower", namespace=HOME, timeout=2.0)
    return LeaderElector(api=lease, identity=identity, timings=TIMINGS, clock=SystemClock())


async def _until(what: str, probe, timeout: float) -> float:  # type: ignore[no-untyped-def]
    """Poll `probe` every 50 ms; return time.time() when it first holds."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await asyncio.sleep(0.05)
    return time.time()


def test_a_leader_that_cannot_renew_stops_sending_at_its_deadline_before_the_other_takes_over(
    scenario: Scenario, control_plane: ControlPlane, tmp_path: Path
) -> None:
    s = scenario
    s.namespace(HOME)
    identity = apply_rbac(s.api, namespace=HOME, suffix="-e2e-fence")
    try:
        # replica-a: its own ServiceAccount, bound to the same leader Role by a binding the test deletes.
        s.api.create(f"/api/v1/namespaces/{HOME}/serviceaccounts", {"metadata": {"name": "replica-a"}})
        binding = {
            "metadata": {"name": "replica-a-leader"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "watchtower-leader"},
            "subjects": [{"kind": "ServiceAccount", "name": "replica-a", "namespace": HOME}],
        }
        rolebindings = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{HOME}/rolebindings"
        s.api.create(rolebindings, binding)
        cp, ca = control_plane.url, control_plane.pki.ca_cert
        kube_a = token_kubeconfig(
            tmp_path / "a.kubeconfig", server=cp, ca=ca, token=identity.token(name="replica-a")
        )
        kube_b = token_kubeconfig(tmp_path / "b.kubeconfig", server=cp, ca=ca, token=identity.token())
        hooks = HookReceiver(new_secret(), delay=0.2).start()
        store = SQLiteAlertStore(tmp_path / "alerts.db")
        try:
            asyncio.run(_scenario(s, kube_a, kube_b, hooks, store, rolebindings))
        finally:
            store.close()
            hooks.stop()
    finally:
        identity.remove()


async def _scenario(
    s: Scenario, kube_a: Path, kube_b: Path, hooks: HookReceiver, store: SQLiteAlertStore, rolebindings: str
) -> None:
    a, b = _elector(kube_a, "replica-a"), _elector(kube_b, "replica-b")
    # Both try at once on no Lease: one creates it; the other's create gets 409, or it reads the Lease
    # the first created and stands by. Never both.
    first = await asyncio.gather(a.try_once(), b.try_once())
    assert [a.holds_now(), b.holds_now()].count(True) == 1, first
    assert lease_of(s.api, HOME)["leaseTransitions"] == 0
    if b.holds_now():  # the test needs replica-a (whose binding it can delete) leading: hand it over
        assert await b.release()
        await a.try_once()
        assert lease_of(s.api, HOME)["leaseTransitions"] == 1
    assert a.holds_now() and not b.holds_now()
    runs = [asyncio.create_task(a.run()), asyncio.create_task(b.run())]
    lost: list[float] = []
    a.on_change = lambda leading: None if leading else lost.append(time.time())

    cfg = settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": "oncall"},
                "receivers": [{"name": "oncall", "webhooks": [{"url": hooks.url, "secret": hooks.secret}]}],
            }
        },
        env={},
    ).alerting
    now = time.time()
    store.enqueue(
        (
            OutboxMessage(
                0, f"key-{i}", INTEGRATION, f"group-{i}", {"alerts": [], "n": i}, now, next_attempt=now
            ),
            INTEGRATION,
            f"group-{i}",
            NotifyEntry(frozenset(), frozenset(), now),
        )
        for i in range(MESSAGES)
    )
    async with httpx.AsyncClient() as http:
        worker = DeliveryWorker(
            store=store, senders=build_senders(cfg, http=http), clock=SystemClock(), cfg=cfg, fence=a
        )
        delivering = asyncio.create_task(worker.run())
        try:
            await _until("5 messages delivered", lambda: len(hooks.received()) >= 5, timeout=30)
            s.api.delete(f"{rolebindings}/replica-a-leader")
            revoked = time.time()
            stopped = await _until("replica-a to stop leading", lambda: not a.holds_now(), timeout=10)
            taken = await _until("replica-b to lead", b.holds_now, timeout=15)
            await asyncio.sleep(1.0)
        finally:
            delivering.cancel()
            for t in runs:
                t.cancel()
            await asyncio.gather(delivering, *runs, return_exceptions=True)
            a.close()
            b.close()

    # Stopped at the renew deadline (counted from its last good renewal, up to one retry before the
    # revocation), and strictly before the other took over.
    # (+1.5 s: the server's RBAC cache may let one renewal through just after the deletion.)
    assert stopped - revoked <= TIMINGS.renew_deadline + 1.5
    assert lost and lost[0] <= stopped + 0.1
    assert stopped < taken
    lease = lease_of(s.api, HOME)
    assert lease["holderIdentity"] == "replica-b"
    # Nothing sent after it stopped leading (a send that passed the fence just before may land a moment
    # later); the rest is pending for the new leader, none given up.
    late = [d for d in hooks.received() if d.arrived > stopped + 0.1]
    assert late == [], [d.webhook_id for d in late]
    sent = {d.webhook_id for d in hooks.received()}
    assert len(sent) < MESSAGES, "everything was sent before the lease was lost: nothing fenced"
    rows = store.messages(limit=MESSAGES)
    assert {m.key for m in rows if m.status is OutboxStatus.DELIVERED} <= sent
    assert [m for m in rows if m.status is OutboxStatus.FAILED] == []
    assert len([m for m in rows if m.status is OutboxStatus.PENDING]) == MESSAGES - len(
        [m for m in rows if m.status is OutboxStatus.DELIVERED]
    )
    assert worker.handed_back <= 1
