"""Alert storm: 10,000 workloads cross a threshold at once.

Prints notifications per group, the time from the snapshot to the first delivery at a real webhook receiver
on 127.0.0.1 against the target group_wait + 1 s (DESIGN §8), how long evaluating the storm takes, and the
longest stall of the event loop meanwhile. References measured in the same run, on the same rows: building
the label sets and fingerprints alone, and a bare SQLite executemany of the alert rows in one transaction.
The watch loop keeps ticking (--tick) during the storm, as it does in the service.
Then the same storm is pushed into a real Alertmanager (--alertmanager current|debian|none) that routes it
to the same receiver: first notification against group_wait + 1 s, and the loop's longest stall printed
beside the built-in path's of the same run.
The receiver runs in a process of its own (--receiver process), as a team's receiver does: in the bench's
process its threads, parsing megabytes of JSON, would take the interpreter lock from the service's event
loop; --receiver thread keeps it in-process, as the bench did at first.
With --owners N (issue 33), the same storm runs again with owner notices on: each workload's pods name one
of N owners (`watchtower.dev/notify`), whose emails go to a real SMTP server (aiosmtpd) in a process of its
own; printed beside the owners-off run: on-call's first notification against group_wait + 1 s, the time
until every owner notice was delivered against a minute, and the loop's longest stall against 100 ms.
With --store postgresql, every run's alert store is a fresh database on a real PostgreSQL (fsync on).
Run: .venv/bin/python -m bench.storm [--workloads 10000] [--namespaces 20] [--group-wait 2] [--tick 15]
     [--alertmanager current] [--receiver process] [--owners 2000] [--store sqlite|postgresql]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import multiprocessing
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

import httpx
import orjson
from prometheus_client import CollectorRegistry

from tests.alerting.helpers import CLASSES, NO_FIT, SECRET, pending, settings, snapshot
from tests.alerting.servers import Receiver, plain_smtp_server
from tests.fixtures import postgres
from tests.fixtures.stores import open_spec
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.senders import build_report_sender, build_senders
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.domain.alerts.holders import gpu_holders
from watchtower.domain.alerts.model import fingerprint
from watchtower.domain.alerts.rules.base import workload_labels
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.tick import Tick
from watchtower.services.alerting import DeliveryWorker, build_alerting
from watchtower.services.analyze import analyze
from watchtower.services.owner_notices import owner_notifier
from watchtower.services.owner_outbox import owner_lanes
from watchtower.simulator import objects as o

# With --store postgresql: one fresh database per storm run, on a real PostgreSQL the bench starts
# (tests/fixtures/postgres.py, fsync on as in life); empty: each run its own SQLite file.
STORES: list[str] = []


def reference_fingerprints(snap: QueueSnapshot) -> float:
    """Return seconds to build every workload's label set and fingerprint, nothing else."""
    t = time.perf_counter()
    for w in snap.workloads:
        fingerprint(workload_labels(w, "WorkloadWaitWarning", "warning"))
    return time.perf_counter() - t


def reference_sqlite(snap: QueueSnapshot, path: Path) -> float:
    """Return seconds for a bare executemany of one row per workload (same durability settings)."""
    rows = [
        (fingerprint(labels), orjson.dumps({"labels": labels, "state": "firing"}))
        for labels in (workload_labels(w, "WorkloadWaitWarning", "warning") for w in snap.workloads)
    ]
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=FULL")
    db.execute("CREATE TABLE alerts (fingerprint TEXT PRIMARY KEY, body BLOB NOT NULL)")
    t = time.perf_counter()
    db.execute("BEGIN IMMEDIATE")
    db.executemany("INSERT OR REPLACE INTO alerts VALUES (?, ?)", rows)
    db.execute("COMMIT")
    took = time.perf_counter() - t
    db.close()
    return took


async def watch_loop_lag(stalls: list[float], every: float = 0.01) -> None:
    """Record how late a 10 ms sleep wakes up: the time the loop was kept from running anything else."""
    while True:
        t = time.perf_counter()
        await asyncio.sleep(every)
        stalls.append(time.perf_counter() - t - every)


def _summary(r: dict[str, Any]) -> dict[str, Any]:
    """What the figures read of a delivery: when it arrived (wall clock), its group, how many alerts."""
    return {"at": r["at"], "groupKey": r["body"]["groupKey"], "alerts": len(r["body"]["alerts"])}


def _serve_receiver(secret: str, conn: Connection) -> None:
    """In the receiver's process: serve, and send each delivery's summary back until told to stop."""
    rcv = Receiver(secret)
    conn.send(rcv.url)
    sent = 0
    while not conn.poll(0.005):
        with rcv.lock:
            new = rcv.requests[sent:]
        sent += len(new)
        for r in new:
            conn.send(_summary(r))
    rcv.stop()


class ProcessReceiver:
    """The test webhook receiver (tests/alerting/servers.py) in a process of its own."""

    def __init__(self, secret: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_receiver, args=(secret, child), daemon=True)
        self._proc.start()
        if not self._conn.poll(60):
            self._proc.kill()
            raise RuntimeError("the receiver's process did not start within 60 s")
        self.url: str = self._conn.recv()
        self._got: list[dict[str, Any]] = []

    @property
    def requests(self) -> list[dict[str, Any]]:
        while self._conn.poll():
            self._got.append(self._conn.recv())
        return self._got

    def stop(self) -> None:
        self._conn.send("stop")
        self._proc.join(10)


class ThreadReceiver:
    """The same receiver in this process's threads."""

    def __init__(self, secret: str) -> None:
        self._rcv = Receiver(secret)
        self.url = self._rcv.url
        self._seen = 0
        self._got: list[dict[str, Any]] = []

    @property
    def requests(self) -> list[dict[str, Any]]:
        with self._rcv.lock:
            new = self._rcv.requests[self._seen :]
        self._seen += len(new)
        self._got.extend(_summary(r) for r in new)
        return self._got

    def stop(self) -> None:
        self._rcv.stop()


async def idle_stall(seconds: float = 3.0) -> float:
    """Return the loop's longest stall while it does nothing else: what the machine's load alone costs."""
    stalls: list[float] = []
    lag = asyncio.create_task(watch_loop_lag(stalls))
    await asyncio.sleep(seconds)
    lag.cancel()
    return max(stalls, default=0.0)


def _serve_smtp(conn: Connection) -> None:
    """In the SMTP server's process: serve, and answer how many messages it holds when asked."""
    ctl, inbox = plain_smtp_server()
    conn.send(ctl.port)
    while True:
        if conn.poll(0.05):
            if conn.recv() == "stop":
                break
            with inbox.lock:
                conn.send(len(inbox.messages))
    ctl.stop()


class ProcessSmtp:
    """The tests' SMTP server (aiosmtpd) in a process of its own, as the owners' mail server is."""

    def __init__(self) -> None:
        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_smtp, args=(child,), daemon=True)
        self._proc.start()
        if not self._conn.poll(60):
            self._proc.kill()
            raise RuntimeError("the SMTP server's process did not start within 60 s")
        self.port: int = self._conn.recv()

    def count(self) -> int:
        self._conn.send("count")
        return int(self._conn.recv())

    def stop(self) -> None:
        self._conn.send("stop")
        self._proc.join(10)


async def _count_later(smtp: ProcessSmtp) -> int:
    await asyncio.sleep(0.5)
    return await asyncio.to_thread(smtp.count)


def owner_objects(n: int, namespaces: int, owners: int, created: float) -> list[dict]:
    """The storm's workloads, each pod naming one of `owners` owners."""
    prio, pclass = CLASSES["medium"]
    return [
        o.pod(
            name=f"job-{i}",
            namespace=f"team-{i % namespaces}",
            created=created,
            gpus=1,
            priority=prio,
            priority_class=pclass,
            annotations={"watchtower.dev/notify": f"owner{i % owners}@corp.example"},
            conditions=[o.unschedulable(created + 1, NO_FIT)],
        )
        for i in range(n)
    ]


def owner_snapshot(objs: list[dict], at: float, s):
    data = orjson.dumps(o.object_list([o.node(f"n{i}") for i in range(4)] + objs))
    a = analyze(data, policy=s.queue_policy(), decoder=ObjectDecoder(read_notify=True), at=at)
    return a.snapshot, a.state


def with_owners(s, smtp_port: int):
    """The storm's settings with owner notices on, sent through an email receiver to the SMTP server."""
    alerting = s.alerting.model_dump(mode="json", by_alias=True, exclude_defaults=True)
    for r in alerting.get("receivers", []):
        for w in r.get("webhooks", []):
            w["secret"] = SECRET
    alerting["receivers"].append(
        {
            "name": "mail",
            "email": [
                {
                    "to": ["unused@corp.example"],
                    "from": "watchtower@corp.example",
                    "smarthost": "127.0.0.1",
                    "port": smtp_port,
                    "security": "none",
                }
            ],
        }
    )
    owners = {"enabled": True, "smtp_receiver": "mail", "allowed_domains": ["corp.example"]}
    return settings(alerting, owners=owners)


def storm_settings(rcv: ProcessReceiver | ThreadReceiver, group_wait: float, alertmanager: str | None = None):
    alerting = {
        "route": {
            "receiver": "hook",
            "group_by": ["alertname", "namespace"],
            "group_wait": f"{group_wait}s",
            "group_interval": "5m",
        },
        "receivers": [{"name": "hook", "webhooks": [{"url": rcv.url, "secret": SECRET}]}],
    }
    if alertmanager is not None:
        alerting |= {"alertmanagers": [alertmanager], "delivery": {"mode": "alertmanager"}}
    return settings(alerting)


async def storm(
    s,
    snap,
    state,
    rcv: ProcessReceiver | ThreadReceiver,
    *,
    group_wait: float,
    tick: float,
    groups: int,
    db: Path,
    smtp: ProcessSmtp | None = None,
    owner_notices: int = 0,
):
    """Run one storm through the service's alerting; return its figures. With `smtp`, owner notices are on
    and the run lasts until `owner_notices` emails arrived (or two minutes)."""
    clock = SystemClock()
    store = open_spec(STORES.pop(0)) if STORES else SQLiteAlertStore(db)
    stalls: list[float] = []
    reevaluations: list[float] = []
    async with httpx.AsyncClient() as http:
        svc = build_alerting(settings=s, store=store)
        senders = build_senders(s.alerting, http=http)
        if smtp is not None:
            svc.owners = owner_notifier(s, state, svc.notifier, CollectorRegistry())
            sender = build_report_sender(s.alerting, receiver="mail", http=http)
            assert sender is not None
            senders.update(owner_lanes(sender))
        worker = DeliveryWorker(store=store, senders=senders, clock=clock, cfg=s.alerting)
        svc.notifier.on_enqueued = worker.wake.set
        if svc.pusher is not None:
            svc.pusher.on_enqueued = worker.wake.set
        flusher = asyncio.create_task(svc.notifier.run(clock))
        holders = gpu_holders(state, s.tier_policy())  # what the queue tracker puts in each Tick
        sending = asyncio.create_task(worker.run())
        lag = asyncio.create_task(watch_loop_lag(stalls))
        await asyncio.sleep(0.05)
        t0 = time.perf_counter()
        w0 = clock.now()
        await svc.on_tick(Tick(at=w0, snapshot=snap, holders=holders))
        evaluate = time.perf_counter() - t0
        next_tick = t0 + tick
        drained = float("nan")
        limit = 120 if smtp is not None else group_wait + 30
        counted = asyncio.create_task(asyncio.sleep(0))
        while time.perf_counter() - t0 < limit:
            done = len(rcv.requests) >= groups
            # The SMTP server's count is asked in a thread, twice a second: a pipe round trip to its
            # process would otherwise stall the loop the figures measure.
            if smtp is not None and counted.done():
                if counted.result() is not None and counted.result() >= owner_notices:
                    drained = clock.now() - w0
                else:
                    counted = asyncio.create_task(_count_later(smtp))
            if done and (smtp is None or drained == drained):
                break
            if time.perf_counter() >= next_tick:
                t1 = time.perf_counter()
                await svc.on_tick(Tick(at=clock.now(), snapshot=snap, holders=holders))
                reevaluations.append(time.perf_counter() - t1)
                next_tick += tick
            await asyncio.sleep(0.01)
        for task in (flusher, sending, lag, counted):
            task.cancel()
        # Counted once the loop is no longer probed: reading the whole outbox is the bench's, not the service's.
        pushed = sum(1 for m in store.messages(limit=100_000) if m.integration.startswith("alertmanager/"))
    store.close()
    reqs = list(rcv.requests)
    return {
        "first": min(r["at"] for r in reqs) - w0 if reqs else float("nan"),
        "last": max(r["at"] for r in reqs) - w0 if reqs else float("nan"),
        "per_group": Counter(r["groupKey"] for r in reqs),
        "alerts": sum(r["alerts"] for r in reqs),
        "evaluate": evaluate,
        "reevaluations": reevaluations,
        "stall": max(stalls, default=0.0),
        "pushes": pushed,
        "owners_drained": drained,
    }


def report(name: str, f: dict, *, n: int, group_wait: float, tick: float) -> None:
    per_group = f["per_group"]
    print(f"[{name}] groups notified={len(per_group)} alerts delivered={f['alerts']}")
    print(
        f"[{name}] storm evaluation (rules + lifecycle + store{' + push' if f['pushes'] else ''}): {f['evaluate']:.3f} s"
    )
    if f["pushes"]:
        print(f"[{name}] POST /api/v2/alerts batches: {f['pushes']}")
    if f["reevaluations"]:
        print(
            f"[{name}] re-evaluation of the same {n} alerts every {tick:g} s: median "
            f"{statistics.median(f['reevaluations']):.3f} s over {len(f['reevaluations'])} ticks"
        )
    print(f"[{name}] longest event-loop stall during the storm: {f['stall'] * 1000:.0f} ms")
    print(
        f"[{name}] notifications per group: max {max(per_group.values(), default=0)}, "
        f"min {min(per_group.values(), default=0)}"
    )
    if f["owners_drained"] == f["owners_drained"] or name.startswith("owners"):
        d = f["owners_drained"]
        ok = "OK" if d <= 60 else "MISSED"
        print(f"[{name}] every owner notice delivered {d:.1f} s after the snapshot; target 60 s -> {ok}")
    verdict = "OK" if f["first"] <= group_wait + 1 else "MISSED"
    print(
        f"[{name}] first notification {f['first']:.2f} s after the snapshot, last {f['last']:.2f} s;"
        f" target group_wait + 1 s = {group_wait + 1:.2f} s -> {verdict}"
    )


async def main(
    n: int,
    namespaces: int,
    group_wait: float,
    tick: float,
    alertmanager: str,
    receiver: str = "process",
    owners: int = 0,
) -> None:
    rcv = ProcessReceiver(SECRET) if receiver == "process" else ThreadReceiver(SECRET)
    s = storm_settings(rcv, group_wait)
    now = SystemClock().now()
    objs = [
        pending(f"job-{i}", "medium", now - 31 * 60, ns=f"team-{i % namespaces}", gpus=1) for i in range(n)
    ]
    t = time.perf_counter()
    snap, state = snapshot(objs, now, s)
    build = time.perf_counter() - t
    del objs  # the service keeps the cluster state and the snapshot, not the raw API objects
    gc.collect()
    # As the service does once the first full listing is in (services/queue_tracker.py): the listed objects are
    # frozen, so a full collection during the storm walks what the storm made, not the whole cluster.
    gc.freeze()
    print(
        f"workloads={n} namespaces={namespaces} receiver in {'its own process' if receiver == 'process' else 'this process'}"
    )
    print(f"queue snapshot of {n} workloads built in {build:.2f} s (not part of the figures)")
    with tempfile.TemporaryDirectory() as d:
        ref_fp = reference_fingerprints(snap)
        ref_sql = reference_sqlite(snap, Path(d) / "reference.db")
        print(f"  reference: {n} label sets + fingerprints alone {ref_fp:.3f} s")
        print(f"  reference: bare sqlite executemany of {n} rows, one transaction {ref_sql:.3f} s")
        idle = await idle_stall()
        print(f"  reference: longest event-loop stall over 3 s with nothing to do {idle * 1000:.0f} ms")
        # The built-in router first: the reference the Alertmanager path is read beside.
        f = await storm(
            s, snap, state, rcv, group_wait=group_wait, tick=tick, groups=namespaces, db=Path(d) / "a.db"
        )
        report("builtin", f, n=n, group_wait=group_wait, tick=tick)
        print(f"  evaluation = {f['evaluate'] / (ref_fp + ref_sql):.1f}x the references")
        if owners:
            await owners_storm(n, namespaces, owners, s, rcv, group_wait, tick, Path(d), f)
        if alertmanager != "none":
            am = start_alertmanager(alertmanager, rcv, group_wait, Path(d))
            try:
                rcv.requests.clear()
                s_am = storm_settings(rcv, group_wait, am.url)
                g = await storm(
                    s_am,
                    snap,
                    state,
                    rcv,
                    group_wait=group_wait,
                    tick=tick,
                    groups=namespaces,
                    db=Path(d) / "b.db",
                )
            finally:
                am.stop()
            report(f"alertmanager {alertmanager}", g, n=n, group_wait=group_wait, tick=tick)
            print(
                f"longest loop stall: Alertmanager path {g['stall'] * 1000:.0f} ms beside the built-in"
                f" path's {f['stall'] * 1000:.0f} ms in the same run (aim: under 100 ms)"
            )
    rcv.stop()


async def owners_storm(
    n: int, namespaces: int, owners: int, s, rcv, group_wait: float, tick: float, d: Path, off: dict
) -> None:
    """The same storm with owner notices on (each pod naming one of `owners`), beside the owners-off run."""
    smtp = ProcessSmtp()
    try:
        so = with_owners(s, smtp.port)
        now = SystemClock().now()
        snap, state = owner_snapshot(owner_objects(n, namespaces, owners, now - 31 * 60), now, so)
        gc.collect()
        gc.freeze()  # as main() and the service do once the picture is listed
        rcv.requests.clear()
        per_owner = min(so.owners.daily_limit, -(-n // owners))
        expected = min(n, owners * per_owner)
        print(
            f"owners={owners}: {expected} owner notices expected (at most {so.owners.daily_limit} a day each)"
        )
        g = await storm(
            so,
            snap,
            state,
            rcv,
            group_wait=group_wait,
            tick=tick,
            groups=namespaces,
            db=d / "owners.db",
            smtp=smtp,
            owner_notices=expected,
        )
        print(f"[owners on] owner notices delivered: {smtp.count()} of {expected}")
    finally:
        smtp.stop()
    report("owners on", g, n=n, group_wait=group_wait, tick=tick)
    print(
        f"owners on beside off, same run: first on-call notification {g['first']:.2f} s vs {off['first']:.2f} s;"
        f" longest loop stall {g['stall'] * 1000:.0f} ms vs {off['stall'] * 1000:.0f} ms (aim: under 100 ms);"
        f" storm evaluation {g['evaluate']:.3f} s vs {off['evaluate']:.3f} s"
    )


def start_alertmanager(flavour: str, rcv: ProcessReceiver | ThreadReceiver, group_wait: float, d: Path):
    """Start a real Alertmanager (Debian's or the current build) routing to the receiver, as the tests do."""
    import yaml

    from alerts.alertmanager import alertmanager_config
    from tests.alerting.alertmanager import Alertmanager, binaries

    exe, _ = binaries(flavour)
    cfg = d / "alertmanager.yml"
    cfg.write_text(yaml.safe_dump(alertmanager_config(storm_settings(rcv, group_wait))))
    return Alertmanager(exe, cfg, d / "am").start()


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--group-wait", type=float, default=2.0)
    ap.add_argument(
        "--tick", type=float, default=15.0, help="seconds between evaluations (queue.evaluate_every: 15)"
    )
    ap.add_argument(
        "--alertmanager",
        choices=["none", "debian", "current"],
        default="current",
        help="also push the storm into a real Alertmanager (Debian's 0.25, or 0.35 built from its Go module)",
    )
    ap.add_argument(
        "--receiver",
        choices=["process", "thread"],
        default="process",
        help="run the webhook receiver in a process of its own (as in life) or in this process's threads",
    )
    ap.add_argument(
        "--owners", type=int, default=0, help="also run the storm with owner notices on, to this many owners"
    )
    ap.add_argument(
        "--store",
        choices=["sqlite", "postgresql"],
        default="sqlite",
        help="the alert store: a SQLite file, or a real PostgreSQL the bench starts on 127.0.0.1",
    )
    a = ap.parse_args()
    server = postgres.start(fsync=True) if a.store == "postgresql" else None
    try:
        if server is not None:
            STORES.extend(server.url(server.database(), with_password=True) for _ in range(3))
        print(f"alert store: {a.store}")
        asyncio.run(
            main(a.workloads, a.namespaces, a.group_wait, a.tick, a.alertmanager, a.receiver, a.owners)
        )
    finally:
        if server is not None:
            server.stop()
