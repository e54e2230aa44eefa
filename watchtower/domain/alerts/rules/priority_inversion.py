"""WorkloadPriorityInversion: urgent work waits while lower-tier pods hold GPUs it could use, and
preemption will not free them (preemptionPolicy Never, no eligible victims, or not helpful).

Size: over 400 lines because the blockers found anew (`_Blockers`, analyze and hand-made input) and kept
from tick to tick (`BlockerIndex`, the service) must find the same, and are checked against each other
best side by side; the index's state is the rule's own and nothing else reads it.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Iterable, Sequence

from watchtower.domain.messages.scheduler import PREEMPTION_WORDS, PreemptionVerdict
from watchtower.domain.queue import QueueSnapshot, WorkloadFacts, WorkloadState, WorkloadStatus
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.workloads import WorkloadKey

from ..model import AlertCandidate
from .base import GpuHolder, RuleInput, RuleSettings, human, links, workload_labels

NAME = "WorkloadPriorityInversion"
WAITING = frozenset({WorkloadState.PENDING, WorkloadState.PARTIAL})
STUCK = frozenset(
    {PreemptionVerdict.POLICY_NEVER, PreemptionVerdict.NO_VICTIMS, PreemptionVerdict.NOT_HELPFUL}
)


Blocker = tuple[WorkloadKey, int, str]  # a lower-tier workload, the GPUs it holds that would help, its tier


class _Blockers:
    """The lower-tier holders on schedulable nodes, read once per evaluation: each stuck workload's
    blockers are then looked up per (its tier's rank, GPUs it needs per pod), not walked again."""

    def __init__(self, inp: RuleInput, top_rank: int) -> None:
        self.tiers = inp.tiers
        self.free = {n.name: n.free for n in inp.snapshot.capacity.nodes if n.schedulable}
        rank: dict[str, int] = {}
        # (workload, node) → GPUs held there, the holder's tier and rank (a list given twice adds up).
        held: dict[tuple[WorkloadKey, str], tuple[int, str, int]] = {}
        for h in inp.holders:
            r = rank.get(h.tier)
            if r is None:
                r = rank[h.tier] = inp.tiers.rank(h.tier)
            if r <= top_rank or h.node not in self.free:
                continue
            k = (h.workload, h.node)
            before = held.get(k)
            held[k] = (h.gpus + (before[0] if before is not None else 0), h.tier, r)
        self.held = held
        self._found: dict[tuple[int, int], tuple[list[Blocker], int, frozenset[WorkloadKey]]] = {}

    def of(self, w: WorkloadStatus) -> tuple[list[Blocker], int]:
        """Return the first six lower-tier workloads whose GPUs on some node would let a pod of `w` fit
        there (most GPUs first), and how many there are in all."""
        need = max(1, w.gpus_per_pod)
        combo = (self.tiers.rank(w.tier), need)
        found = self._found.get(combo)
        if found is None:
            found = self._found[combo] = self._find(*combo)
        first, count, keys = found
        own = w.key
        return [b for b in first if b[0] != own][:6], count - (own in keys)

    def _find(self, rank: int, need: int) -> tuple[list[Blocker], int, frozenset[WorkloadKey]]:
        free = self.free
        # Per workload: GPUs on the nodes where they would help, and the tier on the first such node
        # by name (the order the holders were listed in before they came from an index).
        found: dict[WorkloadKey, tuple[int, str, str]] = {}
        for (key, node), (gpus, tier, r) in self.held.items():
            if r <= rank or free[node] + gpus < need:
                continue
            seen = found.get(key)
            if seen is None:
                found[key] = (gpus, node, tier)
            elif node < seen[1]:
                found[key] = (seen[0] + gpus, node, tier)
            else:
                found[key] = (seen[0] + gpus, seen[1], seen[2])
        # Only the first six are named (five, and one more in case it is the workload itself): a heap, not
        # a sort of tens of thousands.
        top = heapq.nsmallest(7, ((-g, k, t) for k, (g, _, t) in found.items()))
        return [(k, -g, t) for g, k, t in top], len(found), frozenset(found)


# Updates a (rank, need) is kept after the last stuck workload that asked for it: one that comes back soon
# (its last stuck workload flapping) is not built anew, one gone for good is not kept up for ever.
KEEP_UNASKED = 10
_NEVER = 1 << 62  # a threshold no holder's GPUs reach: an unschedulable node has no holder qualify
# What an alert says of its workload itself (`_own_text`): labels, the summary's and description's text
# before the wait, why preemption will not help, the verdict, the links.
_Text = tuple[dict[str, str], str, str, str, str, dict[str, str]]
Held = tuple[int, str, int]  # GPUs one workload holds on one node, the holder's tier and its rank
Combo = tuple[int, int]  # a stuck workload's tier rank and the GPUs it needs per pod


class _Found:
    """One (rank, need)'s blockers as `_Blockers._find` finds them, with the sort it takes the first from."""

    __slots__ = ("found", "order")

    def __init__(self) -> None:
        self.found: dict[WorkloadKey, tuple[int, str, str]] = {}  # key → GPUs, first node by name, its tier
        self.order: list[tuple[int, WorkloadKey, str]] = []  # (-GPUs, key, tier), ascending


class BlockerIndex:
    """`_Blockers` kept from one evaluation to the next, so that a tick costs what changed since the last.

    A stall of 3,000 urgent workloads over 80,000 holders cost the rule most of a second a tick (one walk
    of every holder per tier and size asked), although between two ticks a few hundred holders and nodes
    change. This keeps each (rank, need)'s blockers and, per evaluation, re-derives only the workloads
    whose records changed (as the tracker's HolderIndex says in `holder_changes`; when it does not say, the
    holders it hands on keep their identity while their workload's pods do not change, so the difference is
    a set operation on ids) or that hold GPUs on a node whose free GPUs changed across the size asked. Pure: an evaluation's input in, lookups out; the caller
    keeps one per evaluator and calls it from one thread at a time."""

    def __init__(self) -> None:
        self._reset(None)

    def _reset(self, tiers: TierPolicy | None) -> None:
        """Forget everything: the next update adds every holder (the first, or the tiers changed)."""
        self._tiers = tiers
        self._holders: Sequence[GpuHolder] | None = None
        self._generation: int | None = None  # the HolderChanges generation `_holders` are at, when known
        # (workload, node) → its record: kept alive so that, when no changes are given, the difference with
        # the next holders is one on ids
        self._records: dict[tuple[WorkloadKey, str], GpuHolder] = {}
        self._rank: dict[str, int] = {}
        self._held: dict[tuple[WorkloadKey, str], Held] = {}
        self._nodes_of: dict[WorkloadKey, set[str]] = {}
        self._keys_on: dict[str, set[WorkloadKey]] = {}
        self.free: dict[str, int] = {}
        self._combos: dict[Combo, _Found] = {}
        # What the rule's alerts say of each stuck workload itself, with the facts and settings it is from:
        # kept by `evaluate`.
        self.texts: dict[WorkloadKey, tuple[WorkloadFacts, _Text]] = {}
        self.text_settings: RuleSettings | None = None
        self._used: dict[Combo, int] = {}  # combo → the update after which it was last asked for
        self._updates = 0

    def update(self, inp: RuleInput) -> bool:
        """Move to this evaluation's holders and nodes; return False when the input lists a workload's GPUs
        on one node twice (only hand-made inputs do), which the full evaluation adds up in list order."""
        if inp.tiers is not self._tiers:
            self._reset(inp.tiers)
        self._updates += 1
        for combo in [c for c, at in self._used.items() if self._updates - at > KEEP_UNASKED]:
            del self._combos[combo], self._used[combo]  # no stuck workload has asked for it for a while
        free = {n.name: n.free for n in inp.snapshot.capacity.nodes if n.schedulable}
        old_free, self.free = self.free, free
        moved = {n for n, _ in free.items() ^ old_free.items()}
        touched: set[WorkloadKey] = set()
        holders, changes = inp.holders, inp.holder_changes
        if holders is not self._holders:
            if changes is not None and self._holders is not None and changes.since == self._generation:
                # The tracker says which workloads changed: the tick costs what they hold.
                for key, records in changes.records.items():
                    for node in list(self._nodes_of.get(key, ())):
                        self._drop(self._records[(key, node)])
                    touched.add(key)
                    for h in records:
                        if not self._put(h):
                            self._reset(inp.tiers)
                            return False
            else:
                # Not told (the first, a skipped tick, other tiers asked for): the difference on ids, a
                # set operation over every holder, still no walk of the records that did not change.
                by_id = dict(zip(map(id, holders), holders, strict=True))
                old = {id(h): h for h in self._records.values()}
                for i in old.keys() - by_id.keys():
                    touched.add(self._drop(old[i]))
                for i in by_id.keys() - old.keys():
                    h = by_id[i]
                    if not self._put(h):
                        self._reset(inp.tiers)
                        return False
                    touched.add(h.workload)
            self._holders = holders
        self._generation = changes.upto if changes is not None else None
        if not self._combos:
            return True
        # Per node whose free GPUs changed: its holders' (key, GPUs, rank), read once for every combo, and
        # the free GPUs before and now (None: not schedulable, where nothing qualifies).
        on_moved = []
        held = self._held
        for node in moved:
            keys = self._keys_on.get(node)
            if keys:
                entries = [(k, *held[(k, node)][::2]) for k in keys]
                on_moved.append((old_free.get(node), free.get(node), entries))
        for (rank, need), c in self._combos.items():
            redo = set(touched)
            for before, now, entries in on_moved:
                # A holder there qualifies with `free` when free + its GPUs >= need: only those whose GPUs
                # lie between the two thresholds changed side.
                lo = need - before if before is not None else _NEVER
                hi = need - now if now is not None else _NEVER
                if lo > hi:
                    lo, hi = hi, lo
                redo.update(k for k, g, r in entries if lo <= g < hi and r > rank)
            for key in redo:
                self._redo(c, key, rank, need)
        return True

    def _drop(self, h: GpuHolder) -> WorkloadKey:
        key, node = h.workload, h.node
        del self._held[(key, node)], self._records[(key, node)]
        nodes = self._nodes_of[key]
        nodes.discard(node)
        if not nodes:
            del self._nodes_of[key]
        keys = self._keys_on[node]
        keys.discard(key)
        if not keys:
            del self._keys_on[node]
        return key

    def _put(self, h: GpuHolder) -> bool:
        key, node = h.workload, h.node
        if (key, node) in self._held:
            return False
        r = self._rank.get(h.tier)
        if r is None:
            r = self._rank[h.tier] = self.rank(h.tier)
        self._held[(key, node)] = (h.gpus, h.tier, r)
        self._records[(key, node)] = h
        self._nodes_of.setdefault(key, set()).add(node)
        self._keys_on.setdefault(node, set()).add(key)
        return True

    def rank(self, tier: str) -> int:
        assert self._tiers is not None
        return self._tiers.rank(tier)

    def _redo(self, c: _Found, key: WorkloadKey, rank: int, need: int) -> None:
        """Work one workload's entry out again from its records (as `_Blockers._find` does for all)."""
        old = c.found.pop(key, None)
        if old is not None:
            i = bisect_left(c.order, (-old[0], key, old[2]))
            del c.order[i]
        gpus, first, tier = 0, "", ""
        free = self.free
        for node in self._nodes_of.get(key, ()):
            g, t, r = self._held[(key, node)]
            f = free.get(node)
            if r <= rank or f is None or f + g < need:
                continue
            gpus += g
            if not first or node < first:
                first, tier = node, t
        if first:
            c.found[key] = (gpus, first, tier)
            insort(c.order, (-gpus, key, tier))

    def _build(self, rank: int, need: int) -> _Found:
        c = _Found()
        free = self.free
        found = c.found
        for (key, node), (g, tier, r) in self._held.items():
            f = free.get(node)
            if r <= rank or f is None or f + g < need:
                continue
            seen = found.get(key)
            if seen is None:
                found[key] = (g, node, tier)
            elif node < seen[1]:
                found[key] = (seen[0] + g, node, tier)
            else:
                found[key] = (seen[0] + g, seen[1], seen[2])
        c.order = sorted((-g, k, t) for k, (g, _, t) in found.items())
        return c

    def of(self, w: WorkloadStatus) -> tuple[list[Blocker], int]:
        """Return what `_Blockers.of` returns for `w`, from the kept entries."""
        combo = (self.rank(w.tier), max(1, w.gpus_per_pod))
        self._used[combo] = self._updates
        c = self._combos.get(combo)
        if c is None:
            c = self._combos[combo] = self._build(*combo)
        own = w.key
        first = [(k, -g, t) for g, k, t in c.order[:7] if k != own]
        return first[:6], len(c.found) - (own in c.found)


def may_stick(f: WorkloadFacts, inversion_tiers: frozenset[str]) -> bool:
    """Return True when the workload is stuck as soon as it has waited its warning time (`_stuck` but the
    wait): the facts alone say it, so a caller may keep the answer while the facts stay the same."""
    return f.tier in inversion_tiers and f.state in WAITING and f.preemption in STUCK


def _stuck(w: WorkloadStatus, inversion_tiers: frozenset[str]) -> bool:
    f = w.facts  # read directly, not through the status' properties: every tick asks this of 20,000
    # may_stick's test written out: a call per workload would cost this loop a third more
    return (
        f.tier in inversion_tiers
        and f.state in WAITING
        and f.preemption in STUCK
        and w.wait_seconds >= f.warn_after
    )


def needs_holders(snapshot: QueueSnapshot, inversion_tiers: frozenset[str]) -> bool:
    """Return True when some urgent workload is stuck, so the rule needs the GPU holders."""
    return holders_needed_below(snapshot, inversion_tiers, None) is not None


def holders_needed_below(
    snapshot: QueueSnapshot,
    inversion_tiers: frozenset[str],
    tiers: TierPolicy | None,
    *,
    among: Iterable[WorkloadStatus] | None = None,
) -> int | None:
    """Return the rank of the highest tier with stuck urgent work (the rule reads only holders ranked
    below it), or None when nothing is stuck and the rule needs no holders at all.

    Without `tiers`, 0 for any stuck work. `among`: the snapshot's workloads to look at, when the caller
    knows the others cannot be stuck (`may_stick` false); all of them otherwise."""
    best: int | None = None
    for w in snapshot.workloads if among is None else among:
        if _stuck(w, inversion_tiers):
            if tiers is None:
                return 0
            r = tiers.rank(w.tier)
            best = r if best is None else min(best, r)
    return best


def _own_text(w: WorkloadStatus, inp: RuleInput) -> _Text:
    """Return what an alert says of its workload itself: labels, the summary's and description's text
    before the wait, why preemption will not help, the preemption verdict and links."""
    words = PREEMPTION_WORDS[w.preemption]
    severity = "critical" if inp.tiers.rank(w.tier) == 0 else "warning"
    return (
        workload_labels(w, NAME, severity),
        f"{w.kind} {w.namespace}/{w.name} ({w.tier}) waits ",
        f"{w.kind} {w.namespace}/{w.name} of tier {w.tier} needs {max(1, w.gpus_per_pod)} "
        "GPU(s) per pod and has waited ",
        f"{words[:1].upper()}{words[1:]}, so it will not get them until they finish or someone moves them.",
        w.preemption.value,
        links(inp.settings, NAME, w.key),
    )


def _blocker_text(blockers: list[Blocker], count: int) -> tuple[str, str, str, str]:
    """Return what an alert says of its blockers: the summary's end, the ones named, the first and its tier."""
    top, top_gpus, top_tier = blockers[0]
    named = ", ".join(f"{k} ({g} GPU, tier {t})" for k, g, t in blockers[:5])
    if count > 5:
        named += f" and {count - 5} more"
    return f" while lower-tier {top} holds {top_gpus} GPU(s) it could use", named, str(top), top_tier


def evaluate(inp: RuleInput, index: BlockerIndex | None = None) -> list[AlertCandidate]:
    """Return the rule's alerts; with `index` (kept by the caller across evaluations) the blockers are
    looked up from it, moved by what changed since its last evaluation, rather than found anew."""
    out: list[AlertCandidate] = []
    stuck = [w for w in inp.snapshot.workloads if _stuck(w, inp.settings.inversion_tiers)]
    if not stuck:
        return out
    found: _Blockers | BlockerIndex
    kept: dict[WorkloadKey, tuple[WorkloadFacts, _Text]] = {}
    if index is not None and index.update(inp):
        found = index
        if index.text_settings == inp.settings:
            kept = index.texts
    else:
        found = _Blockers(inp, min(inp.tiers.rank(w.tier) for w in stuck))
    texts: dict[WorkloadKey, tuple[WorkloadFacts, _Text]] = {}
    # Stuck workloads of one tier and size share their blockers: their words are made once an evaluation.
    said: dict[tuple[tuple[Blocker, ...], int], tuple[str, str, str, str]] = {}
    for w in stuck:
        blockers, count = found.of(w)
        if not blockers:
            continue
        f = w.facts
        # What an alert says of its workload is kept while its facts stay the same: a stall of thousands
        # alerts on every tick, with text that differs by the wait and the blockers.
        was = kept.get(f.key)
        own = was[1] if was is not None and was[0] is f else _own_text(w, inp)
        texts[f.key] = (f, own)
        them = (tuple(blockers), count)
        theirs = said.get(them)
        if theirs is None:
            theirs = said[them] = _blocker_text(blockers, count)
        labels, summary, description, why_not, preemption, link = own
        summary_end, named, blocker, blocker_tier = theirs
        waited = human(w.wait_seconds)
        out.append(
            AlertCandidate(
                dict(labels),
                {
                    "summary": summary + waited + summary_end,
                    "description": (
                        f"{description}{waited}. Lower-tier workloads hold GPUs on nodes where it would fit: "
                        f"{named}. {why_not}"
                    ),
                    "blocker": blocker,
                    "blocker_tier": blocker_tier,
                    "preemption": preemption,
                    "wait_seconds": str(round(w.wait_seconds)),
                    **link,
                },
            )
        )
    if index is not None:
        index.texts, index.text_settings = texts, inp.settings
    return out
