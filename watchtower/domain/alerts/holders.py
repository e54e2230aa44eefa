"""The GPUs each workload holds per node, as plain data for the priority-inversion rule."""

from __future__ import annotations

from collections.abc import Iterable
from itertools import chain

from watchtower.domain.change_log import ChangeCursor
from watchtower.domain.records import Pod
from watchtower.domain.state import ClusterState
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.workloads import WorkloadKey

from .rules.base import GpuHolder, HolderChanges


def _holders_of(
    key: WorkloadKey, pods: Iterable[Pod], tiers: TierPolicy, tier_memo: dict[tuple[int, str], str]
) -> list[GpuHolder]:
    """Return one record per node with the GPUs the given pods of one workload hold there, by node."""
    gpus: dict[str, int] = {}
    top: dict[str, Pod] = {}
    for p in pods:
        if not p.holds_resources or p.gpus <= 0:
            continue
        gpus[p.node] = gpus.get(p.node, 0) + p.gpus
        t = top.get(p.node)
        # Equal priorities are broken by uid so that a walk and the index name the same pod whatever
        # order a set of uids comes in.
        if t is None or (p.priority, p.uid) > (t.priority, t.uid):
            top[p.node] = p
    out = []
    for node in sorted(gpus):
        p = top[node]
        tk = (p.priority, p.priority_class)
        tier = tier_memo.get(tk)
        if tier is None:
            tier = tier_memo[tk] = tiers.tier_of(p.priority, p.priority_class).name
        out.append(GpuHolder(key, node, gpus[node], p.priority, p.priority_class, tier, p.preemption_policy))
    return out


def _workload_holders(
    state: ClusterState, key: WorkloadKey, tiers: TierPolicy, tier_memo: dict[tuple[int, str], str]
) -> list[GpuHolder]:
    pods = state.pods
    members = (pods.get(uid) for uid in state.by_workload.get(key, ()))
    return _holders_of(key, (p for p in members if p is not None), tiers, tier_memo)


def gpu_holders(state: ClusterState, tiers: TierPolicy) -> tuple[GpuHolder, ...]:
    """Return one record per (workload, node) with the GPUs its bound, unfinished pods hold there, sorted.

    A walk of every pod (over a second at 150,000): for `analyze` and one-off reads; a tick uses `HolderIndex`.
    """
    memo: dict[tuple[int, str], str] = {}
    out: list[GpuHolder] = []
    for key in sorted(state.by_workload):
        out.extend(_workload_holders(state, key, tiers, memo))
    return tuple(out)


class HolderIndex:
    """The GPU holders of one ClusterState, kept from its change log: a call re-derives the workloads
    touched since the last one (a walk of their pods only) and walks every pod only when the log says
    start over (the first call, a priority class or a namespace changed, the log was cut)."""

    def __init__(self, tiers: TierPolicy) -> None:
        self.tiers = tiers
        self._tier_memo: dict[tuple[int, str], str] = {}
        self._cursor = ChangeCursor()
        self._state: ClusterState | None = None
        # Per tier rank (unknown tiers last), each holding workload's records: a caller that needs only
        # the tiers below some rank takes those dicts and never looks at the others.
        self._by_rank: list[dict[WorkloadKey, tuple[GpuHolder, ...]]] = [
            {} for _ in range(len(tiers.tiers) + 1)
        ]
        self._rank = {t.name: i for i, t in enumerate(tiers.tiers)}
        self._last: tuple[int, tuple[GpuHolder, ...]] | None = None  # (rank, the tuple it returned)
        self._generation = 0  # one per call of `below`
        self.changes: HolderChanges | None = None  # how the last call's answer differs from the one before

    def needs(self, state: ClusterState) -> int:
        """Return the position of `state`'s change log from which this still needs its entries."""
        return self._cursor.needs(state.log) if state is self._state else state.log.changes_end

    def below(self, state: ClusterState, rank: int) -> tuple[GpuHolder, ...]:
        """Return the records of every holder whose tier ranks below `rank` (0 = the top tier), in no
        particular order; the same tuple as the last call when nothing they derive from changed."""
        changed = self._cursor.read(state.log)
        if changed is None or state is not self._state:
            self._state = state
            for d in self._by_rank:
                d.clear()
            changed = set(state.by_workload)
            self._last = None
        moved = [
            key
            for key in changed
            if self._put(key, _workload_holders(state, key, self.tiers, self._tier_memo))
        ]
        last = self._last
        self._generation += 1
        below = self._by_rank[rank + 1 :]
        # What moved, as the records of the tiers asked for: the answer's difference from the last one,
        # unless that was for other tiers or there was none.
        self.changes = (
            HolderChanges(
                self._generation - 1,
                self._generation,
                {k: tuple(chain.from_iterable(d[k] for d in below if k in d)) for k in moved},
            )
            if last is not None and last[0] == rank
            else None
        )
        if last is not None and last[0] == rank and not moved:
            return last[1]
        out = tuple(chain.from_iterable(chain.from_iterable(d.values() for d in below)))
        self._last = (rank, out)
        return out

    def _put(self, key: WorkloadKey, held: list[GpuHolder]) -> bool:
        """Replace one workload's records; return whether they differ from those it had."""
        per_rank: dict[int, tuple[GpuHolder, ...]] = {}
        for h in held:
            r = self._rank.get(h.tier, len(self._rank))
            per_rank[r] = (*per_rank.get(r, ()), h)
        moved = False
        for r, d in enumerate(self._by_rank):
            new = per_rank.get(r)
            if d.get(key) == new:
                continue
            moved = True
            if new is None:
                del d[key]
            else:
                d[key] = new
        return moved


def gpus_held_by_node(state: ClusterState, key: WorkloadKey) -> dict[str, int]:
    """Return node → GPUs one workload's bound, unfinished pods hold there (a walk of its pods only)."""
    out: dict[str, int] = {}
    for uid in state.by_workload.get(key, ()):
        p = state.pods.get(uid)
        if p is not None and p.holds_resources and p.gpus > 0:
            out[p.node] = out.get(p.node, 0) + p.gpus
    return out
