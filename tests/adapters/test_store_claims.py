"""Two replicas on one PostgreSQL store never hand one message to two senders: `due` claims what it returns,
a claim ends with the attempt's outcome, with the claimer's death (at once) or after `claim_for` (a
claimer cut off from the database). On a real PostgreSQL; SQLite serves one replica and has no claims."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.fixtures import postgres
from tests.fixtures.stores import StoreBackend
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage

NOW = 1_800_000_000.0
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def pg(postgres_server) -> StoreBackend:
    if isinstance(postgres_server, postgres.Unavailable):
        pytest.skip(f"PostgreSQL cannot run here: {postgres_server}")
    backend = StoreBackend("postgresql", postgres_server.url(postgres_server.database(), with_password=True))
    yield backend
    for s in backend.opened:
        s.close()


def _fill(store, integrations: dict[str, int]) -> None:
    items = []
    for integration, n in integrations.items():
        for i in range(n):
            key = f"{integration}#{i}"
            msg = OutboxMessage(0, key, integration, key, {"n": i}, NOW, next_attempt=NOW)
            items.append((msg, integration, key, NotifyEntry(frozenset({key}), frozenset(), NOW)))
    store.enqueue(items)


def test_a_head_claimed_by_one_replica_is_not_handed_to_the_other_until_its_outcome(pg):
    a, b = pg.open(), pg.open()
    _fill(a, {"ops/webhook/0": 2, "dev/email/0": 1})
    got_a = a.due(NOW)
    assert [m.key for m in got_a] == ["ops/webhook/0#0", "dev/email/0#0"]
    assert b.due(NOW) == []  # both heads are A's; the second ops message waits behind its head
    a.begin_attempt(got_a[0].id, NOW)
    a.delivered(got_a[0].id, NOW + 1)
    got_b = b.due(NOW + 1)
    assert [m.key for m in got_b] == ["ops/webhook/0#1"]
    b.delivered(got_b[0].id, NOW + 1)
    a.retry_at(got_a[1].id, NOW + 30, "421 try later")  # released with its outcome
    assert b.due(NOW + 1) == []  # not due yet
    assert [m.key for m in b.due(NOW + 30)] == ["dev/email/0#0"]
    assert a.due(NOW + 30) == []  # B's now


def test_replicas_draining_one_outbox_together_send_every_message_once(pg):
    stores = [pg.open(), pg.open(), pg.open()]
    _fill(stores[0], {f"r{i}/webhook/0": 40 for i in range(4)})
    sent: list[str] = []
    lock = threading.Lock()

    def drain(store) -> None:
        while store.depth():
            for m in store.due(NOW):
                store.begin_attempt(m.id, NOW)
                with lock:
                    sent.append(m.key)
                store.delivered(m.id, NOW)

    threads = [threading.Thread(target=drain, args=(s,)) for s in stores]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    counts = Counter(sent)
    assert len(counts) == 160 and set(counts.values()) == {1}
    for i in range(4):  # and each integration still in order
        mine = [int(k.split("#")[1]) for k in sent if k.startswith(f"r{i}/")]
        assert mine == sorted(mine)


CLAIMER = """
import sys, time
from watchtower.adapters.store.postgres import PostgresAlertStore
s = PostgresAlertStore(sys.argv[1])
print(",".join(m.key for m in s.due(float(sys.argv[2]))), flush=True)
time.sleep(600)
"""


def test_the_claim_of_a_replica_killed_mid_send_is_void_at_once(pg):
    b = pg.open()
    _fill(b, {"ops/webhook/0": 1})
    child = subprocess.Popen(
        [sys.executable, "-c", CLAIMER, pg.spec, str(NOW)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ops/webhook/0#0"
        assert b.due(NOW) == []  # the live claimer holds it
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        deadline = time.monotonic() + 10  # the server notices the closed socket when it next reads it
        got = b.due(NOW)
        while not got and time.monotonic() < deadline:
            time.sleep(0.05)
            got = b.due(NOW)
        assert [m.key for m in got] == ["ops/webhook/0#0"]  # long before claim_for (120 s) has passed
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
            child.wait(10)


def test_the_claim_of_a_replica_that_lost_the_database_lapses_after_claim_for(pg):
    a, b = pg.open(), pg.open()
    _fill(a, {"ops/webhook/0": 1})
    assert len(a.due(NOW)) == 1
    assert b.due(NOW + a.claim_for - 1) == []
    assert [m.key for m in b.due(NOW + a.claim_for + 1)] == ["ops/webhook/0#0"]
