"""What one Tick adds to the record of start estimates: the first estimate with a number given for each wait,
and the start (or the going away) of each wait whose estimate is remembered.

Pure: the book before goes in, the book after and the rows to upsert come out. The rows are keyed by the
wait's episode key (the workload and the second its wait began, as the fairness history keys it), so a
restart, a re-list or a second replica builds the same keys and the store keeps one row per wait.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace

from .estimate_accuracy import OUTCOME_GONE, OUTCOME_STARTED, OUTCOME_WAITING, GivenEstimate
from .fairness.record import episode_key, workload_name
from .queue_values import WAITING_STATES, WorkloadState
from .tick import Tick
from .workloads import WorkloadKey


@dataclass(frozen=True, slots=True)
class EstimateBook:
    """The waits whose first estimate is remembered and whose start is not known yet, by workload."""

    open: dict[WorkloadKey, GivenEstimate] = field(default_factory=dict)


def book_from_store(rows: Iterable[GivenEstimate]) -> EstimateBook:
    """Return the book to start from after a restart: the store's estimates still waiting, so a start
    while the service was down is seen (and checked) at the first tick."""
    out: dict[WorkloadKey, GivenEstimate] = {}
    for g in rows:
        if g.outcome != OUTCOME_WAITING:
            continue
        kind, _, name = g.workload.partition("/")
        out[WorkloadKey(g.namespace, kind, name)] = g
    return EstimateBook(out)


def record_estimates(
    tick: Tick, book: EstimateBook, *, present: Callable[[WorkloadKey], bool]
) -> tuple[EstimateBook, tuple[GivenEstimate, ...], tuple[GivenEstimate, ...]]:
    """Return the next book, the estimates first given at this tick and the remembered ones whose wait
    ended at it (started, or gone).

    A wait ends at the first tick that no longer sees it waiting: `started` at that tick's time while
    the workload is `present` (so a start is known to a tick's precision), `gone` when it was deleted.
    A workload waiting again from a later start (preempted, requeued before a tick saw it run) ends its
    old wait as `gone`: when it started is not known, and a guess would be counted as an error."""
    now = tick.at
    waits = tick.waits
    open_ = book.open
    nxt: dict[WorkloadKey, GivenEstimate] | None = None
    given: list[GivenEstimate] = []
    ended: list[GivenEstimate] = []
    seen: set[WorkloadKey] = set()
    for w in tick.snapshot.workloads:
        f = w.facts
        if f.state is WorkloadState.GATED:
            seen.add(f.key)  # held again by gates: not started, and no number to give
            continue
        if f.state not in WAITING_STATES or f.since is None:
            continue
        k = f.key
        seen.add(k)
        old = open_.get(k)
        if old is not None and old.waiting_since == f.since:
            continue  # the usual case: its first estimate is remembered
        if nxt is None:
            nxt = dict(open_)
        if old is not None:
            ended.append(replace(old, outcome=OUTCOME_GONE))
            del nxt[k]
        e = waits.estimate(w) if waits is not None else None
        if e is None or e.start_in is None or e.at is None or e.never:
            continue  # no number given (yet): nothing to check
        g = GivenEstimate(
            key=episode_key(k, f.since),
            namespace=k.namespace,
            workload=workload_name(k),
            tier=f.tier,
            waiting_since=f.since,
            given_at=now,
            estimated_start=e.at,
        )
        nxt[k] = g
        given.append(g)
    left = [k for k in open_ if k not in seen]
    if left:
        if nxt is None:
            nxt = dict(open_)
        for k in left:
            g = nxt.pop(k)
            if present(k):
                ended.append(replace(g, started=now, outcome=OUTCOME_STARTED))
            else:
                ended.append(replace(g, outcome=OUTCOME_GONE))
    if nxt is None:
        return book, (), ()
    return EstimateBook(nxt), tuple(given), tuple(ended)
