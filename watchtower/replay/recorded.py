"""A recorded week as a trace (docs/replay.md, "Recorded weeks"): the store's workload rows as trace jobs and
its node rows as the policy's node inventory.

A workload's run time is its recorded end less its first start (the time it held its GPUs, and any wait
after a preemption with it); one still running counts up to `until` (the last the recorder wrote). One that
never started has no run time of its own: it takes the median run time of the finished jobs of its tier in
the same rows (of all tiers when its tier has none), and is left out when there is none. A workload deleted
before it ever started is left out: it asked for nothing the cluster ran.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from watchtower.domain.replay_record import NodeRecord, WorkloadRecord

from .policy import NodeSpec
from .trace import TraceJob

GIB = 2**30


def recorded_jobs(rows: Iterable[WorkloadRecord], *, until: float) -> list[TraceJob]:
    """Return the trace jobs of `rows` (in arrival order), each run time as the module says."""
    rows = [r for r in rows if not (r.started is None and r.outcome == "deleted") and r.gpus_per_pod > 0]
    ran: dict[str, list[float]] = {}
    for r in rows:
        if r.started is not None and r.ended is not None:
            ran.setdefault(r.tier, []).append(max(0.0, r.ended - r.started))
    every = [d for ds in ran.values() for d in ds]
    median = {t: statistics.median(ds) for t, ds in ran.items()}
    overall = statistics.median(every) if every else None
    out: list[TraceJob] = []
    for r in sorted(rows, key=lambda r: (r.arrived, r.key)):
        if r.started is not None:
            end = r.ended if r.ended is not None else max(until, r.started)
            duration = max(0.0, end - r.started)
        else:
            guess = median.get(r.tier, overall)
            if guess is None:
                continue
            duration = guess
        pods = max(r.pods, 1)
        out.append(
            TraceJob(
                id=r.key,
                team=r.team,
                tier=r.tier,
                priority=r.priority,
                submitted=r.arrived,
                duration=duration,
                pods=pods,
                gpus_per_pod=r.gpus_per_pod,
                started=r.started if r.started is not None and r.started >= r.arrived else None,
                cpu_millis_per_pod=r.cpu_millis_per_pod,
                memory_bytes_per_pod=r.memory_bytes_per_pod,
                gang_min=min(r.gang_min, pods) if r.gang_min else None,
            )
        )
    return out


def recorded_nodes(rows: Sequence[NodeRecord]) -> list[NodeSpec]:
    """Return the node inventory of `rows` (by name), each at the most GPUs, CPU and memory it offered."""
    return [
        NodeSpec(
            name=n.name,
            gpus=n.gpus,
            cpu=n.cpu_millis / 1000 if n.cpu_millis > 0 else None,
            memory_gib=n.memory_bytes / GIB if n.memory_bytes > 0 else None,
        )
        for n in sorted(rows, key=lambda n: n.name)
    ]
