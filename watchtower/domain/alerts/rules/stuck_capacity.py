"""WorkloadStuckDespiteCapacity: a tier's head fits on a node's free resources yet has not started."""

from __future__ import annotations

from ...stuck import StuckHead
from ..model import AlertCandidate
from .base import RuleInput, human, links, workload_labels

NAME = "WorkloadStuckDespiteCapacity"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    """Return one alert per stuck tier head (the Tick found them: `domain.stuck.stuck_heads`)."""
    out = []
    for s in inp.stuck:
        w = s.status
        what = f"{w.kind} {w.namespace}/{w.name}"
        said = s.said or "nothing (no PodScheduled condition)"
        if s.cluster_queue:
            out.append(_kueue(inp, s))
            continue
        out.append(
            AlertCandidate(
                workload_labels(w, NAME, "warning"),
                {
                    "summary": f"{what} ({w.tier} tier, {w.gpus_requested} GPU) heads its tier and fits on "
                    f"node {s.node}, yet has waited {human(w.wait_seconds)}",
                    "description": (
                        f"{what} of team {w.team} is first in the {w.tier} tier's queue. Its pod {s.pod} "
                        f"{s.why}."
                    ),
                    "wait_seconds": str(round(w.wait_seconds)),
                    "node": s.node,
                    "pod": s.pod,
                    "scheduler_name": s.scheduler,
                    "scheduler_said": said,
                    **({"likely_causes": "; ".join(s.causes)} if s.causes else {}),
                    **({"node_taints": ", ".join(s.taints)} if s.taints else {}),
                    **links(inp.settings, NAME, w.key),
                },
            )
        )
    return out


def _kueue(inp: RuleInput, s: StuckHead) -> AlertCandidate:
    w = s.status
    what = f"{w.kind} {w.namespace}/{w.name}"
    return AlertCandidate(
        workload_labels(w, NAME, "warning"),
        {
            "summary": f"{what} ({w.tier} tier, {w.gpus_requested} GPU) is not admitted by Kueue though "
            f"ClusterQueue {s.cluster_queue} has {s.quota_free} GPU(s) of quota free; waited {human(w.wait_seconds)}",
            "description": f"{what} of team {w.team}: {s.why}.",
            "wait_seconds": str(round(w.wait_seconds)),
            "cluster_queue": s.cluster_queue,
            "scheduler_name": s.scheduler,
            "scheduler_said": s.said or "nothing",
            "likely_causes": "; ".join(s.causes),
            **links(inp.settings, NAME, w.key),
        },
    )
