"""What one Tick adds to the record of start estimates: the first estimate with a number given for each wait,
and the start (or the going away) of each wait whose estimate is remembered.

Pure: the book before goes in, the book after and the rows to upsert come out. The rows are keyed by the
wait's episode key (the workload and the second its wait began, as the fairness history keys it), so a
restart, a re-list or a second replica builds the same keys and the store keeps one row per wait.

Cheap on the usual tick, as the fairness recorder is: a tick whose list of facts is the one the book last
saw looks at nothing but the waits due to be asked again; after churn only the facts the queue's order took
out or put in (`Tick.facts_change`) are looked at; every workload's facts only on the first tick (or one off
the change chain). A wait whose estimate has no number yet for want of history is asked again every
`RETRY_EVERY`, at most `TRIES_PER_TICK` of them a tick, and no tick asks more than that many, the first
included (one held by quota, gates or Kueue, or that can never start, is asked again when its facts change): on a cluster of 20,000 waiting workloads most have no number,
and asking all of them at every tick cost four times the tick itself.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from .estimate import from_waits
from .estimate_accuracy import OUTCOME_GONE, OUTCOME_STARTED, OUTCOME_WAITING, GivenEstimate
from .fairness.record import episode_key, workload_name
from .queue_values import WAITING_STATES, WorkloadFacts, WorkloadState
from .tick import Tick
from .workloads import WorkloadKey

# Seconds between two askings of a wait whose estimate had no number: a tier's waits change slowly, and
# each asking costs about 10 µs, so 20,000 such waits asked every 15 min cost 2 % of the tick on average.
RETRY_EVERY = 900.0
TRIES_PER_TICK = 500  # the most asked at one tick: about 5 ms (bench/estimate_record.py)


@dataclass(frozen=True, slots=True)
class EstimateBook:
    """The waits whose first estimate is remembered and whose start is not known yet, by workload; the
    waits without a number yet; the list of facts the book last saw."""

    open: dict[WorkloadKey, GivenEstimate] = field(default_factory=dict)
    later: dict[WorkloadKey, WorkloadFacts] = field(default_factory=dict)  # no number yet: asked again
    # (when, workload): when a wait of `later` is asked again, oldest first (each is pushed a fixed time after
    # its tick, so the order of pushing is the order of asking: a queue, not a heap, whose equal times would
    # compare workload keys); an entry of a wait no longer there is dropped.
    due: tuple[tuple[float, WorkloadKey], ...] = ()
    facts: Sequence[WorkloadFacts] | None = None


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


def _waits(f: WorkloadFacts) -> bool:
    # Gated work has not started (and gets no number): its remembered estimate stays open.
    return f.since is not None and (f.state in WAITING_STATES or f.state is WorkloadState.GATED)


def record_estimates(
    tick: Tick, book: EstimateBook, *, present: Callable[[WorkloadKey], bool]
) -> tuple[EstimateBook, tuple[GivenEstimate, ...], tuple[GivenEstimate, ...]]:
    """Return the next book, the estimates first given at this tick and the remembered ones whose wait
    ended at it (started, or gone).

    A wait ends at the first tick that no longer sees it waiting: `started` at that tick's time while
    the workload is `present`, `gone` when it was deleted. A workload waiting again from a later start
    (preempted, requeued before a tick saw it run) ends its old wait as `gone`: when it started is not
    known, and a guess would be counted as an error."""
    now = tick.at
    facts: Sequence[WorkloadFacts] = tick.listed_facts or tuple(w.facts for w in tick.snapshot.workloads)
    change = tick.facts_change
    touched: dict[WorkloadKey, WorkloadFacts] = {}
    left: set[WorkloadKey] = set()
    if facts is book.facts:
        pass  # nothing changed: only the waits due to be asked again
    elif change is not None and book.facts is not None and change.base is book.facts:
        for f in change.added:
            touched[f.key] = f
        left = {f.key for f in change.removed if f.key not in touched}
    else:
        seen: set[WorkloadKey] = set()
        for f in facts:
            if _waits(f):
                seen.add(f.key)
                touched[f.key] = f
        left = (book.open.keys() | book.later.keys()) - seen
    due = book.due
    if not touched and not left and not (due and due[0][0] <= now):
        return (book if facts is book.facts else replace(book, facts=facts)), (), ()
    open_ = dict(book.open)
    later = dict(book.later)
    queue = deque(due)
    given: list[GivenEstimate] = []
    ended: list[GivenEstimate] = []
    waits = tick.waits
    tries = 0

    def ask(f: WorkloadFacts) -> None:
        nonlocal tries
        if not from_waits(f):
            # No number until its facts change (admitted by Kueue, quota freed, gates lifted): asked then.
            later.pop(f.key, None)
            return
        tries += 1
        at = waits.start_at(f) if waits is not None and f.since is not None else None
        if at is None:
            # More history may give it a number: asked again when due.
            if f.key not in later:
                queue.append((now + RETRY_EVERY, f.key))
            later[f.key] = f
            return
        later.pop(f.key, None)
        assert f.since is not None  # asked only of waits
        g = GivenEstimate(
            key=episode_key(f.key, f.since),
            namespace=f.key.namespace,
            workload=workload_name(f.key),
            tier=f.tier,
            waiting_since=f.since,
            given_at=now,
            estimated_start=at,
        )
        open_[f.key] = g
        given.append(g)

    def end(k: WorkloadKey, *, started: bool) -> None:
        g = open_.pop(k)
        ended.append(
            replace(g, started=now, outcome=OUTCOME_STARTED) if started else replace(g, outcome=OUTCOME_GONE)
        )

    for k, f in touched.items():
        old = open_.get(k)
        if not _waits(f):
            later.pop(k, None)
            if old is not None:
                end(k, started=present(k))
            continue
        if old is not None:
            if old.waiting_since == f.since:
                continue  # the usual case: its first estimate is remembered
            end(k, started=False)  # waiting again from a later start: when it ran is not known
        elif k in later and later[k].since == f.since:
            later[k] = f  # asked again when due, with its newest facts
            continue
        if f.state is WorkloadState.GATED:
            later.pop(k, None)
            continue
        if tries >= TRIES_PER_TICK and from_waits(f):
            # The first tick (or one off the change chain) sees every wait: the rest are asked at the next
            # ticks, first in the queue, so that no tick asks more than its share.
            later[k] = f
            queue.appendleft((now, k))
            continue
        ask(f)
    for k in left:
        later.pop(k, None)
        if k in open_:
            end(k, started=present(k))
    while queue and queue[0][0] <= now and tries < TRIES_PER_TICK:
        _, k = queue.popleft()
        again = later.pop(k, None)
        if again is not None:  # else it started, went away or got its number since
            ask(again)
    return EstimateBook(open_, later, tuple(queue), facts), tuple(given), tuple(ended)
