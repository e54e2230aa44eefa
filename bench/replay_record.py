"""What recording a week for replay costs (domain/replay_record.py, services/replay_record.py): the bytes each
workload adds to the SQLite store, and the time of one recording pass on the event loop, each beside a
reference measured in the same run.

- Bytes: every workload of bench/tick.py's cluster (150,000 pods, 20,000 pending, its gangs, jobs and Kueue
  Workloads) recorded as it arrives, starts and finishes (three upserts each, as the recorder writes them),
  into a fresh SQLite file, checkpointed; the file's growth over the workloads recorded. Reference: the
  same workloads as the CSV trace `watchtower replay --export` writes.
- Time: a pass after 1 % of the pending pods changed (the usual one, once a minute of cluster time: only
  the workloads the state's change log names are looked at), and the passes after a start (every workload
  new, BACKLOG_CHUNK of them a tick), beside the QueueTracker's evaluation tick of the same cluster.

    .venv/bin/python bench/replay_record.py [--pods 150000] [--pending 20000] [--runs 5]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import os
import random
import sqlite3
import tempfile
import time

from msgspec.structs import replace
from tick import NOW, loaded_tracker, median_ms

from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.domain.change_log import ChangeCursor
from watchtower.domain.replay_record import NodeRecord, ReplayState, WorkloadRecord, record_replay, view_of
from watchtower.replay.recorded import recorded_jobs
from watchtower.replay.trace import format_csv
from watchtower.services.replay_record import BACKLOG_CHUNK


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()

    tracker, pods, nodes, _, _, _ = loaded_tracker(args.pods, args.pending, kueue=20_000)
    state = tracker.state
    gc.freeze()
    tiers, team_of = tracker.policy.tiers, state.team_of
    tick = tracker.evaluate(NOW)

    cursor = ChangeCursor()
    tracker.log_readers.append(cursor)  # as bootstrap.replay_recorder registers it
    cursor.read(state.log)
    # After a start the service looks at every workload BACKLOG_CHUNK at a tick (services/replay_record.py).
    recorded = ReplayState()
    every = list(set(state.by_workload).union(f.key for f in tick.listed_facts))
    chunk_ms: list[float] = []
    node_rows: tuple[NodeRecord, ...] = ()
    got: list[WorkloadRecord] = []
    skipped: dict[str, int] = {}
    for i in range(0, len(every), BACKLOG_CHUNK):
        t0 = time.perf_counter()
        part = record_replay(
            view_of(tick, state, set(every[i : i + BACKLOG_CHUNK])), recorded, tiers, team_of
        )
        chunk_ms.append((time.perf_counter() - t0) * 1000)
        got.extend(part.workloads)
        for reason, k in part.skipped.items():
            skipped[reason] = skipped.get(reason, 0) + k
        node_rows = node_rows or part.nodes
    chunk_ms.sort()
    tick_ms = median_ms(lambda: tracker.evaluate(NOW + 1), args.runs)

    pending = [p for p in pods if not p.node]
    rnd = random.Random(7)
    churn_ms: list[float] = []
    for run in range(args.runs):
        # 1 % of the pending pods changed (a new annotation each): a new Pod record, a touch in the log.
        for p in rnd.sample(pending, len(pending) // 100):
            state.upsert_pod(replace(p, annotations={"bench": str(run)}))
        churned = tracker.evaluate(NOW + 2 + run)
        touched = cursor.read(state.log)
        t0 = time.perf_counter()
        record_replay(view_of(churned, state, touched), recorded, tiers, team_of)
        churn_ms.append((time.perf_counter() - t0) * 1000)
    churn_ms.sort()
    pass_ms = churn_ms[len(churn_ms) // 2]

    workloads = got
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "state.db")
        h = SQLiteFairnessHistory(path, sync_each_commit=False)
        h.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        empty = os.path.getsize(path)
        arrived = [dataclasses.replace(w, started=None, ended=None, outcome="waiting") for w in workloads]
        began = [dataclasses.replace(w, started=w.arrived + 60, outcome="running") for w in workloads]
        ended = [dataclasses.replace(w, ended=w.arrived + 3660, outcome="finished") for w in began]
        for batch in (arrived, began, ended):
            for i in range(0, len(batch), 500):  # a pass's worth at a time, as the recorder commits
                h.record_replay(batch[i : i + 500], node_rows if i == 0 else ())
        h.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        full = os.path.getsize(path)
        h.close()
        con = sqlite3.connect(path)
        (n,) = con.execute("SELECT COUNT(*) FROM replay_workloads").fetchone()
        con.close()
    csv_bytes = sum(len(line.encode()) for line in format_csv(recorded_jobs(ended, until=NOW + 7200)))

    print(f"cluster: {len(pods):,} pods, {len(nodes):,} nodes; {n:,} GPU workloads recorded, {skipped}")
    print(f"store: {(full - empty) / n:,.0f} bytes per recorded workload ({full - empty:,} bytes, SQLite)")
    print(f"  reference, the same workloads as the CSV trace: {csv_bytes / n:,.0f} bytes per workload")
    print(
        f"pass: after 1 % of the pending pods changed {pass_ms:,.1f} ms (median of {args.runs}; by the change log)"
    )
    print(
        f"  after a start: {len(chunk_ms)} passes of {BACKLOG_CHUNK:,} workloads, one a tick:"
        f" median {chunk_ms[len(chunk_ms) // 2]:,.0f} ms, max {chunk_ms[-1]:,.0f} ms"
    )
    print(f"  reference, the evaluation tick of the same cluster: {tick_ms:,.0f} ms (median of {args.runs})")


if __name__ == "__main__":
    main()
