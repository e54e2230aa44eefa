"""The waiting workloads in queue order, and what that order alone gives a tick, kept by difference.

After churn a tick re-derives a few hundred of tens of thousands of workloads. Re-sorting, re-counting and
re-planning all of them each time was most of such a tick, so the order is kept as parallel lists (the
facts, their sort keys, their wait starts, whether each is queued) that are spliced at the changed places
with list slices, which copy at C speed; who is ahead of whom is then a prefix sum of the queued flags
(itertools.accumulate), not a loop over the workloads. A reader of the order (the QueueTracker's gauges and
indexes) asks `change_since` for what was removed and added since the generation it last saw.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Iterable, Sequence
from itertools import accumulate, repeat
from operator import itemgetter, mul
from typing import NamedTuple, TypeVar

from watchtower.domain.queue_values import Fragmentation, WorkloadFacts, WorkloadState

from .workloads import WorkloadKey

OrderKey = tuple[int, int, float, WorkloadKey]
QUEUED = (
    WorkloadState.PENDING,
    WorkloadState.PARTIAL,
)  # may fragment; the scheduler-queued among them count in positions
_rank = itemgetter(0)
T = TypeVar("T")
NO_WAIT = float("inf")


def order_key(f: WorkloadFacts) -> OrderKey:
    return f.order


class Plan(NamedTuple):
    """What a queue order alone gives each tick's views: kept while the order stays the same."""

    facts: list[WorkloadFacts]
    # When each wait began; NO_WAIT for none (an unknown start, or running): `now - since` is then below
    # zero, which the wait's clamp at zero turns into no wait, at C speed (`map`, not a Python loop).
    since: list[float]
    ahead: list[int]
    ahead_higher_tier: list[int]


class QueueChange(NamedTuple):
    """The facts one change of the order took out and put in, the generation it was made on, and the
    list of facts it was made from (a reader that kept that list applies the change to it)."""

    before: int
    removed: tuple[WorkloadFacts, ...]
    added: tuple[WorkloadFacts, ...]
    base: Sequence[WorkloadFacts] = ()


class QueueOrder:
    """Workload facts in the scheduler's order (`WorkloadFacts.order`), with their plan, fragmentation
    and gated pods; `replace` takes out and puts in facts without touching the rest."""

    def __init__(self, facts: Iterable[WorkloadFacts] = ()) -> None:
        self.generation = 0
        self._last: QueueChange | None = None
        self._set(sorted(facts, key=order_key))

    def _set(self, ordered: list[WorkloadFacts]) -> None:
        self.facts = ordered
        self._keys = [f.order for f in ordered]
        self._since = [_start(f) for f in ordered]
        self._queued = [_queued(f) for f in ordered]
        self.gated = sum(f.pods_gated for f in ordered)
        # The queued facts by GPUs per pod: the fragmented ones at any free GPUs are a few of these buckets.
        self._by_gpus: dict[int, dict[WorkloadKey, WorkloadFacts]] = {}
        for f in ordered:
            self._bucket(f, True)
        self._plan: Plan | None = None
        self._frags: tuple[tuple[int, int], tuple[Fragmentation, ...]] | None = None

    def _bucket(self, f: WorkloadFacts, put: bool) -> bool:
        """File or unfile a facts under its GPUs per pod; return whether it can fragment at all."""
        if f.gpus_per_pod <= 0 or f.state not in QUEUED:
            return False
        if put:
            self._by_gpus.setdefault(f.gpus_per_pod, {})[f.key] = f
        else:
            self._by_gpus.get(f.gpus_per_pod, {}).pop(f.key, None)
        return True

    def reset(self, facts: Iterable[WorkloadFacts]) -> None:
        """Take a new order from scratch: readers of the last one start over too."""
        self.generation += 1
        self._last = None
        self._set(sorted(facts, key=order_key))

    def replace(self, removed: Sequence[WorkloadFacts], added: Sequence[WorkloadFacts]) -> None:
        """Take out `removed` (facts in the order) and put in `added` (facts not in it)."""
        if not removed and not added:
            return
        keys, facts = self._keys, self.facts
        base = facts
        gone = sorted(removed, key=order_key)
        drops = [bisect_left(keys, f.order) for f in gone]  # ascending, as `gone` is
        if len(set(drops)) != len(drops) or any(
            i >= len(facts) or facts[i] is not f for i, f in zip(drops, gone, strict=True)
        ):
            # Not facts of this order (a caller's mistake): start over rather than keep a wrong order.
            ids = {id(f) for f in removed}
            self.reset([*(f for f in facts if id(f) not in ids), *added])
            return
        fresh = sorted(added, key=order_key)
        kept_keys = _without(self._keys, drops)
        at = []
        lo = 0
        for f in fresh:
            lo = bisect_left(kept_keys, f.order, lo)
            at.append(lo)
        self._keys = _with(kept_keys, at, [f.order for f in fresh])
        self.facts = _with(_without(self.facts, drops), at, fresh)
        self._since = _with(_without(self._since, drops), at, [_start(f) for f in fresh])
        self._queued = _with(_without(self._queued, drops), at, [_queued(f) for f in fresh])
        moved = False
        for f in removed:
            self.gated -= f.pods_gated
            moved |= self._bucket(f, False)
        for f in fresh:
            self.gated += f.pods_gated
            moved |= self._bucket(f, True)
        self._plan = None
        if moved:
            self._frags = None
        self._last = QueueChange(self.generation, tuple(removed), tuple(fresh), base)
        self.generation += 1

    def last_change(self) -> QueueChange | None:
        """Return the change that made the current facts from the ones before; None after a start over."""
        last = self._last
        if last is not None and last.before + 1 == self.generation:
            return last
        return None

    def change_since(
        self, generation: int
    ) -> tuple[tuple[WorkloadFacts, ...], tuple[WorkloadFacts, ...]] | None:
        """Return (removed, added) since the order's `generation`; None when a reader must start over."""
        if generation == self.generation:
            return (), ()
        last = self._last
        if last is not None and last.before == generation and generation + 1 == self.generation:
            return last.removed, last.added
        return None

    def plan(self) -> Plan:
        """Return each facts' wait start and who is ahead of it (queued ones only), the clock left out."""
        if self._plan is None:
            queued, keys = self._queued, self._keys
            before = list(accumulate(queued, initial=0))  # queued workloads before each position
            ahead = list(map(mul, before, queued))
            # The order is by tier first: within a tier's run, those ahead in higher tiers are the
            # queued ones before the run began.
            higher: list[int] = []
            start, n = 0, len(keys)
            while start < n:
                end = bisect_left(keys, keys[start][0] + 1, start, key=_rank)
                higher.extend(map(mul, repeat(before[start], end - start), queued[start:end]))
                start = end
            self._plan = Plan(self.facts, self._since, ahead, higher)
        return self._plan

    def fragmentation(self, largest_free: int, free_total: int) -> tuple[Fragmentation, ...]:
        """Return the queued workloads whose pods fit the free GPUs in total but no single node, by key."""
        lo, hi = largest_free, free_total
        if self._frags is None or self._frags[0] != (lo, hi):
            frags = [
                Fragmentation(k, gpus, hi, lo)
                for gpus, by in self._by_gpus.items()
                if lo < gpus <= hi
                for k in by
            ]
            self._frags = ((lo, hi), tuple(sorted(frags, key=lambda f: f.key)))
        return self._frags[1]


def _queued(f: WorkloadFacts) -> int:
    """Return 1 for work counted ahead of the workloads behind it (the one place that says which), else 0:
    only work whose pods wait in the scheduler's queue (WorkloadFacts.scheduler_queued) is ahead of a pod; a
    job Kueue holds has no pods, its place is Kueue's."""
    return 1 if f.scheduler_queued else 0


def _start(f: WorkloadFacts) -> float:
    return NO_WAIT if f.since is None or f.state is WorkloadState.RUNNING else f.since


def _without(items: list[T], drops: list[int]) -> list[T]:
    """Return `items` less the (sorted) positions `drops`, copied slice by slice."""
    if not drops:
        return items
    out: list[T] = []
    start = 0
    for i in drops:
        out += items[start:i]
        start = i + 1
    out += items[start:]
    return out


def _with(items: list[T], at: list[int], new: list[T]) -> list[T]:
    """Return `items` with new[j] put before position at[j] (at ascending), copied slice by slice."""
    if not at:
        return items
    out: list[T] = []
    start = 0
    for i, x in zip(at, new, strict=True):
        out += items[start:i]
        out.append(x)
        start = i
    out += items[start:]
    return out
