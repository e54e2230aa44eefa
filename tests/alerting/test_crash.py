"""A delivery process killed with SIGKILL in the middle of a send, then restarted: nothing is lost and the
one message in flight is sent at most twice, both times under the same idempotency key."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.alerting.helpers import SECRET, T0
from tests.alerting.servers import Receiver
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage

ROOT = Path(__file__).resolve().parents[2]


def _child(db: str, url: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.alerting.deliver_child", db, url], cwd=ROOT, env={**os.environ}
    )


def test_sigkill_mid_send_then_restart_loses_nothing_and_duplicates_at_most_the_one_in_flight(store_backend):
    db = store_backend.spec
    store = store_backend.open()
    keys = [f"msg_{i}" for i in range(5)]
    store.enqueue(
        (
            OutboxMessage(0, k, "default/webhook/0", "{}:{}", {"version": "4", "n": i}, T0, next_attempt=T0),
            "default/webhook/0",
            f"g{i}",
            NotifyEntry(frozenset({k}), frozenset(), T0),
        )
        for i, k in enumerate(keys)
    )
    store.close()
    rcv = Receiver(SECRET)
    rcv.hold = threading.Event()
    child = _child(db, rcv.url)
    try:
        deadline = time.monotonic() + 60
        while not rcv.requests and time.monotonic() < deadline:
            time.sleep(0.05)
        assert rcv.requests, "the child never sent"
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
        hold, rcv.hold = rcv.hold, None
        hold.set()
        child = _child(db, rcv.url)
        assert child.wait(60) == 0
    finally:
        if child.poll() is None:
            os.kill(child.pid, signal.SIGKILL)
        rcv.stop()
    ids = [r["id"] for r in rcv.requests]
    assert set(ids) == set(keys)  # nothing lost
    assert len(ids) == len(keys) + 1 and ids.count(keys[0]) == 2  # the one in flight, resent once
    assert ids[0] == keys[0] and [i for i in ids if i != keys[0]] == keys[1:]  # in order
    assert all(r["verified"] for r in rcv.requests)
    store = store_backend.open()
    assert store.depth() == {}
    store.close()
