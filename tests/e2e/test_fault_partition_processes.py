"""The leader cut off from the API server but not from its receivers, with two `watchtower run` processes:
each its own configuration and its own fault proxy (tests/faults/proxy.py) between it and the real API
server, both sharing one PostgreSQL store (a real server of the test's own), as the HA overlay's replicas do.
Each replica sends to its own webhook receiver (same signing secret), so a delivery tells which replica made
it; the two together are what a team's endpoint would see.

An alert storm is under way from replica-a (the leader) when its proxy partitions it (new connections
refused, open ones carry nothing; the receivers and the store still reachable). What holds, as in the
one-process test (test_fault_partition.py): replica-a stops leading at its renew deadline, before replica-b
may take the Lease, and sends nothing after; replica-b takes over and finishes the storm; nothing is lost,
nothing is said twice beyond a resend under the same webhook-id; healed, replica-a follows replica-b.
Leadership is read from each process's /healthz (served locally, not through the proxy), every 50 ms.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

from tests.e2e.api import wait_for
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.failover import Replica, audit, lease_of, replica_config, storm
from tests.e2e.identity import apply_rbac, token_kubeconfig
from tests.e2e.scenario import Scenario
from tests.e2e.webhooks import Delivery, HookReceiver, new_secret
from tests.faults.proxy import FaultProxy
from tests.fixtures import postgres

pytestmark = pytest.mark.e2e

HOME, STORM = "e2e-partproc-home", "e2e-partproc-storm"
LEASE = (6.0, 4.0, 1.0)  # duration, renew deadline, retry period
PODS = 40


@pytest.fixture
def own_server() -> Iterator[postgres.PostgresServer]:
    try:
        server = postgres.start()
    except postgres.Unavailable as e:
        pytest.skip(f"PostgreSQL cannot run here: {e}")
    yield server
    server.stop()


def _config(path: Path, *, kubeconfig: Path, hooks: HookReceiver, store_url: str, home: str) -> Path:
    """failover.py's replica configuration, on the shared PostgreSQL store instead of a SQLite file."""
    replica_config(
        path,
        kubeconfig=kubeconfig,
        hook=hooks.url,
        secret=hooks.secret,
        store=path.with_suffix(".unused.db"),
        lease_namespace=home,
        lease=LEASE,
    )
    doc = yaml.safe_load(path.read_text())
    doc["store"] = {"url": store_url}
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def _outbox(url: str) -> list[tuple[object, ...]]:
    """The outbox's messages not delivered, with their claims: what a failure message shows."""
    import psycopg

    with psycopg.connect(url) as db:
        return db.execute(
            "SELECT key, status, attempts, next_attempt, claim_pid, claimed_until, last_error FROM outbox"
            " WHERE status <> 'delivered' ORDER BY id"
        ).fetchall()


def _role(r: Replica) -> str:
    s = r.leadership()
    return "unknown" if s is None else str(s["role"])


def test_two_processes_the_partitioned_leader_stops_before_the_other_leads_and_nothing_is_lost(
    scenario: Scenario, control_plane: ControlPlane, own_server: postgres.PostgresServer
) -> None:
    s = scenario
    home = s.namespace(HOME)
    ns = s.namespace(STORM, team="oncall")
    identity = apply_rbac(s.api, namespace=home, suffix="-e2e-partproc")
    api_port = int(urlsplit(control_plane.url).port or 443)
    proxies = {n: FaultProxy(api_port).start() for n in ("a", "b")}
    secret = new_secret()
    hooks = {n: HookReceiver(secret, delay=0.2).start() for n in ("a", "b")}
    store_url = own_server.url(own_server.database(), with_password=True)
    replicas: dict[str, Replica] = {}
    try:
        token, ca = identity.token(), control_plane.pki.ca_cert
        for n in ("a", "b"):
            kube = token_kubeconfig(
                s.workdir / f"{n}.kubeconfig",
                server=f"https://127.0.0.1:{proxies[n].port}",
                ca=ca,
                token=token,
            )
            cfg = _config(
                s.workdir / f"{n}.yaml", kubeconfig=kube, hooks=hooks[n], store_url=store_url, home=home
            )
            replicas[n] = Replica(f"replica-{n}", cfg, s.workdir).start()
            if n == "a":
                wait_for("replica-a leading", replicas["a"].leads, timeout=30)
        a, b = replicas["a"], replicas["b"]

        def b_follows_a() -> bool:
            st = b.leadership()
            return st is not None and st["role"] == "follower" and st["holder"].startswith("replica-a_")

        wait_for("replica-b following replica-a", b_follows_a, timeout=30)

        def everything() -> list[Delivery]:
            return sorted([*hooks["a"].received(), *hooks["b"].received()], key=lambda d: d.arrived)

        expected = storm(s.api, ns, PODS)
        wait_for(
            "the storm under way at replica-a's receiver",
            lambda: len(hooks["a"].received()) >= 10,
            timeout=60,
        )
        proxies["a"].partition()  # replica-a reaches its receiver and the store, not the API server
        partitioned = time.time()
        stopped = taken = 0.0
        deadline = time.monotonic() + 30
        while not (stopped and taken):  # both roles polled together: the order is what is asserted
            assert time.monotonic() < deadline, f"a: {_role(a)}, b: {_role(b)}\n{a.log()}\n{b.log()}"
            now = time.time()
            if not stopped and _role(a) != "leader":
                stopped = now
            if not taken and _role(b) == "leader":
                taken = now
            time.sleep(0.05)
        before = lease_of(s.api, home)
        try:
            wait_for(
                "every storm workload notified",
                lambda: audit(everything(), expected).delivered == PODS,
                timeout=90,
            )
        except AssertionError as e:
            got = audit(everything(), expected)
            raise AssertionError(
                f"{e}\nlost: {got.lost}\noutbox: {_outbox(store_url)}\n{b.log()[-3000:]}"
            ) from None
        time.sleep(3)  # anything sent twice would have arrived by now (group_interval 2 s)
        proxies["a"].heal()
        healed = time.time()

        def a_follows_b() -> bool:
            st = a.leadership()
            return st is not None and st["role"] == "follower" and st["holder"].startswith("replica-b_")

        wait_for("replica-a, healed, following replica-b", a_follows_b, timeout=30)
        followed = time.time()
        time.sleep(2)
        result = audit(everything(), expected)
        by_a_late = [d.webhook_id for d in hooks["a"].received() if d.arrived > stopped + 0.1]
        by_b = len(hooks["b"].received())
    finally:
        for r in replicas.values():
            r.stop()
        for h in hooks.values():
            h.stop()
        for p in proxies.values():
            p.stop()
        identity.remove()

    duration, deadline_s, retry = LEASE
    print(
        f"\npartition (two processes): replica-a stopped leading {stopped - partitioned:.1f}s after it,"
        f" replica-b led {taken - stopped:.1f}s after that; healed, replica-a followed in {followed - healed:.1f}s;"
        f" {len(everything())} deliveries ({by_b} by replica-b) for {PODS} workloads: lost {len(result.lost)},"
        f" duplicated {result.duplicated}, re-sent under the same id {result.redelivered}"
    )
    # The renew deadline fences it (plus a retry period and a second for the polling and a loaded machine),
    # well before the lease it last renewed can run out.
    assert stopped - partitioned <= deadline_s + retry + 1.0, stopped - partitioned
    assert stopped < taken, "the partitioned leader must stop before the other leads"
    assert by_a_late == [], "replica-a sent after it stopped leading"
    assert before["holderIdentity"].startswith("replica-b_")
    assert result.lost == []
    assert result.duplicated == 0, "a notification said twice under different webhook-ids"
    assert result.redelivered <= 1 and result.unsigned == 0
    assert by_b > 0, "replica-b sent nothing: there was nothing left to take over"
