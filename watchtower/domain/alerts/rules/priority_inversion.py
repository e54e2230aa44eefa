"""WorkloadPriorityInversion: urgent work waits while lower-tier pods hold GPUs it could use, and
preemption will not free them (preemptionPolicy Never, no eligible victims, or not helpful)."""

from __future__ import annotations

import heapq
from collections.abc import Iterable

from watchtower.domain.messages.scheduler import PREEMPTION_WORDS, PreemptionVerdict
from watchtower.domain.queue import QueueSnapshot, WorkloadFacts, WorkloadState, WorkloadStatus
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.workloads import WorkloadKey

from ..model import AlertCandidate
from .base import RuleInput, human, links, workload_labels

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


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    out: list[AlertCandidate] = []
    stuck = [w for w in inp.snapshot.workloads if _stuck(w, inp.settings.inversion_tiers)]
    if not stuck:
        return out
    found = _Blockers(inp, min(inp.tiers.rank(w.tier) for w in stuck))
    for w in stuck:
        blockers, count = found.of(w)
        if not blockers:
            continue
        top, top_gpus, top_tier = blockers[0]
        named = ", ".join(f"{k} ({g} GPU, tier {t})" for k, g, t in blockers[:5])
        if count > 5:
            named += f" and {count - 5} more"
        words = PREEMPTION_WORDS[w.preemption]
        severity = "critical" if inp.tiers.rank(w.tier) == 0 else "warning"
        labels = workload_labels(w, NAME, severity)
        out.append(
            AlertCandidate(
                labels,
                {
                    "summary": f"{w.kind} {w.namespace}/{w.name} ({w.tier}) waits {human(w.wait_seconds)} "
                    f"while lower-tier {top} holds {top_gpus} GPU(s) it could use",
                    "description": (
                        f"{w.kind} {w.namespace}/{w.name} of tier {w.tier} needs {max(1, w.gpus_per_pod)} "
                        f"GPU(s) per pod and has waited {human(w.wait_seconds)}. Lower-tier workloads hold "
                        f"GPUs on nodes where it would fit: {named}. "
                        f"{words[:1].upper()}{words[1:]}, so it will not get them "
                        "until they finish or someone moves them."
                    ),
                    "blocker": str(top),
                    "blocker_tier": top_tier,
                    "preemption": w.preemption.value,
                    "wait_seconds": str(round(w.wait_seconds)),
                    **links(inp.settings, NAME, w.key),
                },
            )
        )
    return out
