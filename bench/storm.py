"""Alert storm: 10,000 workloads cross a threshold at once.

Prints notifications per group, the time from the snapshot to the first delivery at a real webhook receiver
on 127.0.0.1 against the target group_wait + 1 s (DESIGN §8), how long evaluating the storm takes, and the
longest stall of the event loop meanwhile. References measured in the same run, on the same rows: building
the label sets and fingerprints alone, and a bare SQLite executemany of the alert rows in one transaction.
The watch loop keeps ticking (--tick) during the storm, as it does in the service.
Run: .venv/bin/python -m bench.storm [--workloads 10000] [--namespaces 20] [--group-wait 2] [--tick 15]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import sqlite3
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx
import orjson

from tests.alerting.helpers import SECRET, pending, settings, snapshot
from tests.alerting.servers import Receiver
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.senders import build_senders
from watchtower.adapters.store_sqlite import SQLiteAlertStore
from watchtower.domain.alerts.holders import gpu_holders
from watchtower.domain.alerts.model import fingerprint
from watchtower.domain.alerts.rules.base import workload_labels
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.tick import Tick
from watchtower.services.alerting import DeliveryWorker, build_alerting


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


async def main(n: int, namespaces: int, group_wait: float, tick: float) -> None:
    rcv = Receiver(SECRET)
    s = settings(
        {
            "route": {
                "receiver": "hook",
                "group_by": ["alertname", "namespace"],
                "group_wait": f"{group_wait}s",
                "group_interval": "5m",
            },
            "receivers": [{"name": "hook", "webhooks": [{"url": rcv.url, "secret": SECRET}]}],
        }
    )
    clock = SystemClock()
    now = clock.now()
    objs = [
        pending(f"job-{i}", "medium", now - 31 * 60, ns=f"team-{i % namespaces}", gpus=1) for i in range(n)
    ]
    t = time.perf_counter()
    snap, state = snapshot(objs, now, s)
    build = time.perf_counter() - t
    del objs  # the service keeps the cluster state and the snapshot, not the raw API objects
    gc.collect()
    with tempfile.TemporaryDirectory() as d:
        ref_fp = reference_fingerprints(snap)
        ref_sql = reference_sqlite(snap, Path(d) / "reference.db")
        store = SQLiteAlertStore(Path(d) / "storm.db")
        stalls: list[float] = []
        reevaluations: list[float] = []
        async with httpx.AsyncClient() as http:
            svc = build_alerting(settings=s, store=store)
            worker = DeliveryWorker(
                store=store, senders=build_senders(s.alerting, http=http), clock=clock, cfg=s.alerting
            )
            svc.notifier.on_enqueued = worker.wake.set
            flusher = asyncio.create_task(svc.notifier.run(clock))
            holders = gpu_holders(state, s.tier_policy())  # what the watcher puts in each Tick
            sender = asyncio.create_task(worker.run())
            lag = asyncio.create_task(watch_loop_lag(stalls))
            await asyncio.sleep(0.05)
            t0 = time.perf_counter()
            w0 = clock.now()
            await svc.on_tick(Tick(at=w0, snapshot=snap, holders=holders))
            evaluate = time.perf_counter() - t0
            next_tick = t0 + tick
            while len(rcv.requests) < namespaces and time.perf_counter() - t0 < group_wait + 30:
                if time.perf_counter() >= next_tick:
                    t1 = time.perf_counter()
                    await svc.on_tick(Tick(at=clock.now(), snapshot=snap, holders=holders))
                    reevaluations.append(time.perf_counter() - t1)
                    next_tick += tick
                await asyncio.sleep(0.01)
            for task in (flusher, sender, lag):
                task.cancel()
        store.close()
    rcv.stop()
    first = min(r["at"] for r in rcv.requests) - w0 if rcv.requests else float("nan")
    last = max(r["at"] for r in rcv.requests) - w0 if rcv.requests else float("nan")
    per_group = Counter(r["body"]["groupKey"] for r in rcv.requests)
    alerts = sum(len(r["body"]["alerts"]) for r in rcv.requests)
    print(f"workloads={n} groups={len(per_group)} alerts delivered={alerts}")
    print(f"queue snapshot of {n} workloads built in {build:.2f} s (not part of the figures)")
    print(
        f"storm evaluation (rules + lifecycle + store): {evaluate:.3f} s"
        f" = {evaluate / (ref_fp + ref_sql):.1f}x the references below"
    )
    print(f"  reference: {n} label sets + fingerprints alone {ref_fp:.3f} s")
    print(f"  reference: bare sqlite executemany of {n} rows, one transaction {ref_sql:.3f} s")
    if reevaluations:
        print(
            f"re-evaluation of the same {n} alerts every {tick:g} s: median "
            f"{statistics.median(reevaluations):.3f} s over {len(reevaluations)} ticks"
        )
    print(f"longest event-loop stall during the storm: {max(stalls, default=0.0) * 1000:.0f} ms")
    print(
        f"notifications per group: max {max(per_group.values(), default=0)}, "
        f"min {min(per_group.values(), default=0)}"
    )
    print(f"first delivery {first:.2f} s after the snapshot, last {last:.2f} s")
    verdict = "OK" if first <= group_wait + 1 else "MISSED"
    print(f"target: group_wait + 1 s = {group_wait + 1:.2f} s -> {verdict}")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", type=int, default=10_000)
    ap.add_argument("--namespaces", type=int, default=20)
    ap.add_argument("--group-wait", type=float, default=2.0)
    ap.add_argument(
        "--tick", type=float, default=15.0, help="seconds between evaluations (queue.evaluate_every: 15)"
    )
    a = ap.parse_args()
    asyncio.run(main(a.workloads, a.namespaces, a.group_wait, a.tick))
