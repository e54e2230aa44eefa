"""Running workloads per tier, kept from a ClusterState's change log rather than recounted."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from watchtower.domain.queue_values import TrainingSelector

from .change_log import ChangeCursor
from .state import ClusterState
from .tiers import TierPolicy
from .workloads import WorkloadKey


class RunningTiers:
    """The tier of every workload with a bound, unfinished training pod (the first such pod's), and the
    count per tier: a call re-derives only the workloads touched since the last one."""

    def __init__(self, tiers: TierPolicy, selector: TrainingSelector) -> None:
        self.tiers = tiers
        self.selector = selector
        self._cursor = ChangeCursor()
        self._state: ClusterState | None = None
        self._tier: dict[WorkloadKey, str] = {}
        self._count: Counter[str] = Counter()
        self._memo: dict[tuple[int, str], str] = {}

    def needs(self, state: ClusterState) -> int:
        """Return the position of `state`'s change log from which this still needs its entries."""
        return self._cursor.needs(state.log) if state is self._state else state.log.changes_end

    def by_tier(self, state: ClusterState, listed: Iterable[WorkloadKey]) -> dict[str, int]:
        """Return tier → running workloads, each tier named, leaving out the `listed` ones (a tick's
        waiting and partly placed workloads, which the queue counts)."""
        changed = self._cursor.read(state.log)
        if changed is None or state is not self._state:
            self._state = state
            self._tier.clear()
            self._count.clear()
            changed = set(state.by_workload)
        for key in changed:
            self._update(state, key)
        out = dict.fromkeys((t.name for t in self.tiers.tiers), 0)
        out.update(self._count)
        tier = self._tier
        for key in listed:
            t = tier.get(key)
            if t is not None:
                out[t] -= 1
        return out

    def _update(self, state: ClusterState, key: WorkloadKey) -> None:
        old = self._tier.pop(key, None)
        if old is not None:
            self._count[old] -= 1
        new = self._derive(state, key)
        if new is not None:
            self._tier[key] = new
            self._count[new] += 1

    def _derive(self, state: ClusterState, key: WorkloadKey) -> str | None:
        pods, matches = state.pods, self.selector.matches
        for uid in state.by_workload.get(key, ()):
            p = pods.get(uid)
            if p is not None and p.holds_resources and not p.terminal and matches(p):
                k = (p.priority, p.priority_class)
                tier = self._memo.get(k)
                if tier is None:
                    tier = self._memo[k] = self.tiers.tier_of(p.priority, p.priority_class).name
                return tier
        return None
