"""WorkloadPriorityInversion: urgent work waits while lower-tier pods hold GPUs it could use, and
preemption will not free them (preemptionPolicy Never, no eligible victims, or not helpful)."""

from __future__ import annotations

from collections import defaultdict

from watchtower.domain.messages import PREEMPTION_WORDS, PreemptionVerdict
from watchtower.domain.queue import QueueSnapshot, WorkloadState, WorkloadStatus
from watchtower.domain.workloads import WorkloadKey

from ..model import AlertCandidate
from .base import GpuHolder, RuleInput, human, links, workload_labels

NAME = "WorkloadPriorityInversion"
STUCK = frozenset(
    {PreemptionVerdict.POLICY_NEVER, PreemptionVerdict.NO_VICTIMS, PreemptionVerdict.NOT_HELPFUL}
)


def _blockers(w: WorkloadStatus, inp: RuleInput) -> list[tuple[WorkloadKey, int, str]]:
    """Return lower-tier workloads whose GPUs on some node would let a pod of `w` fit there."""
    rank = inp.tiers.rank(w.tier)
    free = {n.name: n.free for n in inp.snapshot.capacity.nodes if n.schedulable}
    per_node: dict[tuple[WorkloadKey, str], GpuHolder] = {}
    held: dict[tuple[WorkloadKey, str], int] = defaultdict(int)
    for h in inp.holders:
        if inp.tiers.rank(h.tier) <= rank or h.node not in free or h.workload == w.key:
            continue
        held[(h.workload, h.node)] += h.gpus
        per_node[(h.workload, h.node)] = h
    need = max(1, w.gpus_per_pod)
    found: dict[WorkloadKey, tuple[int, str]] = {}
    for (key, node), gpus in held.items():
        if free[node] + gpus >= need:
            total, tier = found.get(key, (0, per_node[(key, node)].tier))
            found[key] = (total + gpus, tier)
    return sorted(((k, g, t) for k, (g, t) in found.items()), key=lambda x: (-x[1], x[0]))


def _stuck(w: WorkloadStatus, inversion_tiers: frozenset[str]) -> bool:
    return (
        w.tier in inversion_tiers
        and w.state in (WorkloadState.PENDING, WorkloadState.PARTIAL)
        and w.preemption in STUCK
        and w.wait_seconds >= w.warn_after
    )


def needs_holders(snapshot: QueueSnapshot, inversion_tiers: frozenset[str]) -> bool:
    """Return True when some urgent workload is stuck, so the rule needs the GPU holders.

    Listing the holders walks every bound pod (over a second at 150,000 pods): a tick does it only then.
    """
    return any(_stuck(w, inversion_tiers) for w in snapshot.workloads)


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    out = []
    for w in inp.snapshot.workloads:
        if not _stuck(w, inp.settings.inversion_tiers):
            continue
        blockers = _blockers(w, inp)
        if not blockers:
            continue
        top, top_gpus, top_tier = blockers[0]
        named = ", ".join(f"{k} ({g} GPU, tier {t})" for k, g, t in blockers[:5])
        if len(blockers) > 5:
            named += f" and {len(blockers) - 5} more"
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
