"""What recording the fairness history adds to a tick: record_tick (domain/fairness/record.py) over the
QueueTracker's tick of bench/tick.py's cluster (150,000 pods, 20,000 pending, the gangs, jobs and Kueue
Workloads beside them), beside that tick itself as the reference, measured in the same run.

Three figures: the first tick (every waiting workload opens an episode), an unchanged tick (the service's
usual one: the queue reuses every workload's facts, so recording compares identities), and a tick after 1 %
of the pending pods changed (only the workloads the queue's order took out or put in are looked at), and
that tick again without the order's change (the full comparison a restart or a missed tick pays). The store's write is not timed
here (it runs off the event loop and only when something changed).

    .venv/bin/python bench/fairness_record.py [--pods 150000] [--pending 20000] [--runs 15]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import random
import time

from msgspec.structs import replace
from tick import NOW, loaded_tracker, median_ms

from watchtower.domain.fairness.record import RecordedState, RecordPolicy, record_tick


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pods", type=int, default=150_000)
    ap.add_argument("--pending", type=int, default=20_000)
    ap.add_argument("--runs", type=int, default=15)
    args = ap.parse_args()

    tracker, *_ = loaded_tracker(args.pods, args.pending, kueue=20_000)
    state = tracker.state
    gc.freeze()
    policy = RecordPolicy(
        tiers=tracker.policy.tiers,
        gang_stall_after=tracker.settings.alerting.rules.gang_stall_after,
        team_of=state.team_of,
    )

    def present(k: object) -> bool:
        return k in state.by_workload

    first = tracker.evaluate(NOW)
    t0 = time.perf_counter()
    recorded, opened = record_tick(first, RecordedState(), policy, present=present)
    first_ms = (time.perf_counter() - t0) * 1000
    waiting = sum(1 for w in first.snapshot.workloads if w.waiting)

    tick_ms = median_ms(lambda: tracker.evaluate(NOW + 15), args.runs)
    # The next tick records what crossed a threshold in between; the one after is the service's usual tick.
    recorded, _ = record_tick(tracker.evaluate(NOW + 15), recorded, policy, present=present)
    steady = tracker.evaluate(NOW + 16)
    _, none = record_tick(steady, recorded, policy, present=present)
    unchanged_ms = median_ms(lambda: record_tick(steady, recorded, policy, present=present), args.runs)
    recorded, _ = record_tick(steady, recorded, policy, present=present)

    # 1 % of the pending pods change (a new nominated node): their workloads' facts are derived again, so
    # their episodes are built and compared.
    rnd = random.Random(5)
    pending = [p for p in state.pods.values() if not p.bound and not p.terminal]
    for p in rnd.sample(pending, max(1, len(pending) // 100)):
        state.upsert_pod(replace(p, nominated_node="gpu-0001" if p.nominated_node != "gpu-0001" else ""))
    t0 = time.perf_counter()
    churned = tracker.evaluate(NOW + 17)  # this tick derives the changed workloads' facts again
    churn_tick_ms = (time.perf_counter() - t0) * 1000
    _, some = record_tick(churned, recorded, policy, present=present)
    churn_ms = median_ms(lambda: record_tick(churned, recorded, policy, present=present), args.runs)
    # The same tick without the order's change (a restart, a tick not recorded): every workload's facts
    # compared by key, which is what each changed tick cost before recording followed the change.
    unchained = dataclasses.replace(churned, facts_change=None)
    full_ms = median_ms(lambda: record_tick(unchained, recorded, policy, present=present), args.runs)

    print(
        f"state: {len(state.pods):,} pods, {waiting:,} waiting workloads, "
        f"{len(first.snapshot.preemptions)} preemptions in the window"
    )
    print(f"reference: the QueueTracker's tick (unchanged)          {tick_ms:8.2f} ms median")
    print(
        f"record_tick, first tick (opens {len(opened.episodes):,} episodes, {len(opened.incidents):,} incidents) "
        f"{first_ms:8.2f} ms (once)"
    )
    print(
        f"record_tick, unchanged tick ({len(none.episodes)} episodes to write)     {unchanged_ms:8.2f} ms median "
        f"= {unchanged_ms / tick_ms:.1%} of the tick"
    )
    print(
        f"record_tick, 1 % of pending pods changed ({len(some.episodes)} episodes to write) {churn_ms:8.2f} ms "
        f"median = {churn_ms / tick_ms:.1%} of the unchanged tick; the QueueTracker's tick with that change took "
        f"{churn_tick_ms:.2f} ms (once)"
    )
    print(
        f"  the same tick off the change chain (every workload compared by key) {full_ms:8.2f} ms median "
        f"= {full_ms / tick_ms:.1%} of the unchanged tick (before: what every changed tick cost)"
    )


if __name__ == "__main__":
    main()
