"""What checking the start estimates adds to a tick: record_estimates (domain/estimate_record.py) over the
QueueTracker's tick of bench/tick.py's cluster (150,000 pods, 20,000 pending, the gangs, jobs and Kueue
Workloads beside them), beside that tick itself as the reference, measured in the same run.

Figures: the first tick (every waiting workload asked once), an unchanged tick (the service's usual one:
one identity test), a tick after 1 % of the pending pods changed (only what the queue's order took out or
put in is looked at), a tick when the waits without a number are due to be asked again, and the store's
upsert of the first tick's rows (off the event loop in the service) with the
figures' read of a week of checked rows.

    .venv/bin/python bench/estimate_record.py [--pods 150000] [--pending 20000] [--runs 15]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import tempfile
import time

from msgspec.structs import replace
from tick import NOW, loaded_tracker, median_ms

from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.domain.estimate_accuracy import accuracy, errors_of
from watchtower.domain.estimate_record import RETRY_EVERY, TRIES_PER_TICK, EstimateBook, record_estimates


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()

    tracker, *_ = loaded_tracker(args.pods, args.pending, kueue=20_000)
    state = tracker.state
    # Recent waits of every tier, so that estimates have a number (10 min .. 3 h 20 min).
    for tier in (t.name for t in tracker.policy.tiers.tiers):
        for i in range(20):
            tracker.history.record(tier, at=NOW - 3600 + i, wait=600.0 * (i + 1))
    gc.freeze()

    def present(k: object) -> bool:
        return k in state.by_workload

    first = tracker.evaluate(NOW)
    t0 = time.perf_counter()
    book, given, _ = record_estimates(first, EstimateBook(), present=present)
    first_ms = (time.perf_counter() - t0) * 1000
    waiting = sum(1 for w in first.snapshot.workloads if w.waiting)

    tick_ms = median_ms(lambda: tracker.evaluate(NOW + 15), args.runs)
    steady = tracker.evaluate(NOW + 16)
    # The waits the first tick left are asked at the next ticks, TRIES_PER_TICK at a time.
    backlog_ms: list[float] = []
    while book.due and book.due[0][0] <= NOW:
        t0 = time.perf_counter()
        book, more, _ = record_estimates(steady, book, present=present)
        backlog_ms.append((time.perf_counter() - t0) * 1000)
        given += more
    _, again, ended = record_estimates(steady, book, present=present)
    unchanged_ms = median_ms(lambda: record_estimates(steady, book, present=present), args.runs)

    # 1 % of the pending pods change (a new nominated node): their workloads' facts are derived again.
    rnd = random.Random(5)
    pending = [p for p in state.pods.values() if not p.bound and not p.terminal]
    for p in rnd.sample(pending, max(1, len(pending) // 100)):
        state.upsert_pod(replace(p, nominated_node="gpu-0001" if p.nominated_node != "gpu-0001" else ""))
    churned = tracker.evaluate(NOW + 17)
    churn_ms = median_ms(lambda: record_estimates(churned, book, present=present), args.runs)
    book, _, _ = record_estimates(churned, book, present=present)
    # RETRY_EVERY later the waits without a number are asked again, TRIES_PER_TICK of them a tick.
    retry = dataclasses.replace(churned, at=NOW + 17 + RETRY_EVERY)
    _, retried, _ = record_estimates(retry, book, present=present)
    retry_ms = median_ms(lambda: record_estimates(retry, book, present=present), args.runs)

    with tempfile.TemporaryDirectory() as tmp:
        h = SQLiteFairnessHistory(os.path.join(tmp, "state.db"))
        t0 = time.perf_counter()
        h.record_estimates(given)
        write_ms = (time.perf_counter() - t0) * 1000
        started = [dataclasses.replace(g, started=g.given_at + 900, outcome="started") for g in given]
        h.record_estimates(started)
        t0 = time.perf_counter()
        figures = accuracy(errors_of(h.estimates_started(NOW - 7 * 86400, NOW + 86400)))
        read_ms = (time.perf_counter() - t0) * 1000
        h.close()

    print(
        f"state: {len(state.pods):,} pods, {waiting:,} waiting workloads, {len(given):,} first estimates given"
    )
    print(f"reference: the QueueTracker's tick (unchanged)              {tick_ms:8.2f} ms median")
    print(f"record_estimates, first tick ({TRIES_PER_TICK:,} waits asked)          {first_ms:8.2f} ms (once)")
    print(
        f"  the rest at the next {len(backlog_ms)} ticks: max {max(backlog_ms, default=0):.2f} ms "
        f"({len(given):,} first estimates given in all)"
    )
    print(
        f"record_estimates, unchanged tick ({len(again)} given, {len(ended)} ended)     {unchanged_ms:8.2f} ms median "
        f"= {unchanged_ms / tick_ms:.1%} of the tick"
    )
    print(
        f"record_estimates, 1 % of pending pods changed                 {churn_ms:8.2f} ms median "
        f"= {churn_ms / tick_ms:.1%} of the tick"
    )
    print(
        f"record_estimates, a tick {RETRY_EVERY:.0f} s later ({TRIES_PER_TICK:,} waits asked again, "
        f"{len(retried)} given) {retry_ms:8.2f} ms median = {retry_ms / tick_ms:.1%} of the tick"
    )
    print(f"store (SQLite, off the loop): upsert of the first tick's rows {write_ms:8.2f} ms (once)")
    print(
        f"  the figures from {sum(a.n for a in figures.values()):,} checked rows (read + computed)  {read_ms:8.2f} ms "
        "(once per 5 min)"
    )


if __name__ == "__main__":
    main()
