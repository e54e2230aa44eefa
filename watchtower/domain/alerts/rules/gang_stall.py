"""WorkloadGangStalled: part of a gang holds GPUs while the rest waits, so nobody uses them."""

from __future__ import annotations

from watchtower.domain.queue import WorkloadState

from ..model import AlertCandidate
from .base import RuleInput, human, links, workload_labels

NAME = "WorkloadGangStalled"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    out = []
    limit = inp.settings.gang_stall_after
    for w in inp.snapshot.workloads:
        if w.state is not WorkloadState.PARTIAL or not w.gang or w.wait_seconds < limit:
            continue
        out.append(
            AlertCandidate(
                workload_labels(w, NAME, "warning"),
                {
                    "summary": f"{w.kind} {w.namespace}/{w.name} holds {w.gpus_held} GPU(s) idle while "
                    f"{w.pods_pending} pod(s) wait for {human(w.wait_seconds)}",
                    "description": (
                        f"{w.pods_running} pod(s) of the gang are placed and hold {w.gpus_held} GPU(s); "
                        f"{w.pods_pending} pod(s) have waited {human(w.wait_seconds)} (limit {human(limit)}). "
                        f"A gang cannot start until every pod runs, so those GPUs do no work. Why: {w.why}."
                    ),
                    "gpus_held": str(w.gpus_held),
                    "wait_seconds": str(round(w.wait_seconds)),
                    **links(inp.settings, NAME, w.key),
                },
            )
        )
    return out
