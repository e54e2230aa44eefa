"""The tick after a new namespace, at bench/tick.py's size (150,000 pods, 20,000 pending, the gangs, jobs and
Kueue Workloads beside them).

A namespace gives its workloads their team and nothing else, so its arrival touches that namespace's workloads
only (domain/state.py `_touch_namespace`). The reference, measured in the same run, is what it did before
(issue 34): `log.touch_all()`, after which every reader of the change log (the queue, running work, the GPU
holders) re-derived every workload.

    .venv/bin/python bench/namespace.py [--runs 7]
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time

from tick import NOW, loaded_tracker

from watchtower.domain.records import Namespace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    tracker, *_ = loaded_tracker(150_000, 20_000, kinds=True, kueue=20_000)
    state = tracker.state
    gc.freeze()  # as the service does after its first lists
    tracker.evaluate(NOW)
    tracker.evaluate(NOW)

    def timed() -> float:
        t = time.perf_counter()
        tracker.evaluate(NOW)
        return (time.perf_counter() - t) * 1000

    quiet, new_ns, reference = [], [], []
    for i in range(args.runs):
        quiet.append(timed())
        state.upsert_namespace(Namespace(f"bench-team-{i}", f"team-{i}"))
        new_ns.append(timed())
        state.log.touch_all()
        reference.append(timed())
    med = statistics.median
    print(f"{len(state.pods):,} pods; medians of {args.runs} ticks")
    print(f"  tick, nothing changed:        {med(quiet):8.1f} ms")
    print(f"  tick after a new namespace:   {med(new_ns):8.1f} ms (max {max(new_ns):.1f})")
    print(f"  reference, every reader anew: {med(reference):8.1f} ms (max {max(reference):.1f})")
    print(f"  ratio: {med(reference) / med(new_ns):.0f}x")


if __name__ == "__main__":
    main()
