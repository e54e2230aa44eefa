"""A `watchtower run` process whose PostgreSQL connection stays open and carries nothing at run time (the
fault proxy's blackhole, open and new connections alike), while messages wait to be delivered. Real parts:
a PostgreSQL server of the test's own, the fault proxy between the process and it, the process itself (the
simulated cluster as its source), a real HTTP webhook receiver (helpers of test_postgres_mid_migration.py).

The messages are written straight into the store by the test (a second writer, as another replica's tick
would), due at once; the process's delivery worker finds them at its next look (within 5 s).

What holds: meanwhile `/healthz` answers promptly (the store's calls run off the event loop, and each is
bounded by `store.timeout`); once healed, deliveries resume by themselves (same process): every message
arrives, none twice but under its own id.
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest
import yaml

from tests.faults.proxy import FaultProxy
from tests.faults.test_postgres_mid_migration import (
    INTEGRATION,
    Receiver,
    Replica,
    _wait,
    own_server,  # noqa: F401  (the fixture)
)
from tests.fixtures import postgres
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage, OutboxStatus

pytest.importorskip("psycopg", reason="PostgreSQL cannot run here: psycopg is not installed")
from watchtower.adapters.store.postgres import PostgresAlertStore  # noqa: E402

TIMEOUT = 3  # store.timeout of the process (seconds)
SILENCE = 15.0  # how long the store's path stays silent


def _enqueue(store: PostgresAlertStore, keys: list[str]) -> None:
    now = time.time()
    store.enqueue(
        (
            OutboxMessage(0, key, INTEGRATION, key, {"alerts": [], "key": key}, now, next_attempt=0.0),
            INTEGRATION,
            key,
            NotifyEntry(frozenset(), frozenset(), now),
        )
        for key in keys
    )


def test_deliveries_resume_after_the_store_connection_of_a_running_process_went_silent(
    own_server: postgres.PostgresServer,  # noqa: F811
    tmp_path: Path,
) -> None:
    db = own_server.database()
    direct = own_server.url(db, with_password=True)
    writer = PostgresAlertStore(direct)
    proxy = FaultProxy(own_server.port).start()
    hooks = Receiver()
    config = {
        "cluster": {"source": "sim"},
        "server": {"host": "127.0.0.1", "port": 0},
        "store": {"url": direct.replace(f":{own_server.port}/", f":{proxy.port}/"), "timeout": f"{TIMEOUT}s"},
        "alerting": {
            "route": {"receiver": "ops"},
            "receivers": [{"name": "ops", "webhooks": [{"url": hooks.url}]}],
            "delivery": {"backoff_base": "0.2s", "backoff_cap": "1s"},
        },
    }
    path = tmp_path / "replica.yaml"
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    before = [f"before-{i}" for i in range(4)]
    during = [f"during-{i}" for i in range(4)]
    replica = Replica("replica", path, tmp_path)
    health: list[float] = []
    ready: Counter[int] = Counter()
    try:
        _wait("the replica serving", replica.serving, timeout=60)
        found = re.search(r"serving at (http://\S+?)/?$", replica.out.read_text(), re.M)
        assert found
        base = found.group(1)
        _enqueue(writer, before)
        _wait("the first messages delivered", lambda: set(before) <= set(hooks.received()), timeout=30)

        stop = threading.Event()

        def probe() -> None:
            with httpx.Client(timeout=10) as http:
                while not stop.is_set():
                    began = time.monotonic()
                    http.get(f"{base}/healthz").raise_for_status()
                    health.append(time.monotonic() - began)
                    ready[http.get(f"{base}/readyz").status_code] += 1
                    time.sleep(0.2)

        prober = threading.Thread(target=probe, daemon=True)
        proxy.blackhole(new=True)
        prober.start()
        _enqueue(writer, during)
        time.sleep(SILENCE)
        proxy.heal()
        healed = time.monotonic()
        _wait("every message delivered", lambda: set(during) <= set(hooks.received()), timeout=60)
        resumed = time.monotonic() - healed
        time.sleep(2)  # a second delivery of any of them would have arrived by now
        stop.set()
        prober.join(15)
        rows = {m.key: m.status for m in writer.messages(limit=100)}
    finally:
        replica.stop()
        hooks.stop()
        proxy.stop()
        writer.close()

    log = replica.log()
    got = Counter(k for k in hooks.received() if k in before + during)
    print(
        f"\nstore connection of a running process silent {SILENCE:g}s: all delivered {resumed:.1f}s after heal;"
        f" /healthz max {max(health) * 1000:.0f} ms over {len(health)} probes; /readyz codes {dict(ready)};"
        f" cut {log.count('no answer within')} time(s) (logged), reconnections timed out"
        f" {log.count('connection timeout expired')} time(s); {sum(got.values())} arrivals for {len(got)} messages"
    )
    assert "Traceback" not in log, log[-3000:]
    # The cut call's own error, or the reconnection's that waited behind it on the store's lock (the
    # delivery reports whichever it meets first).
    assert "no answer within" in log or "connection timeout expired" in log, log[-3000:]
    assert set(got) == set(before + during), "nothing lost"
    assert all(n <= 2 for n in got.values()), got
    assert {k: rows.get(k) for k in before + during} == dict.fromkeys(before + during, OutboxStatus.DELIVERED)
    assert max(health) < 1.0, "/healthz stays prompt while the store hangs"
