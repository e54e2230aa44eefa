"""WorkloadQuotaBlocked: the controller cannot even create the pods, its namespace's quota refuses them."""

from __future__ import annotations

from watchtower.domain.queue import WorkloadState

from ..model import AlertCandidate
from .base import RuleInput, human, links, workload_labels

NAME = "WorkloadQuotaBlocked"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    out = []
    for w in inp.snapshot.workloads:
        severity = w.severity
        if w.state is not WorkloadState.QUOTA_BLOCKED or not severity:
            continue
        quota = w.quota.quota if w.quota is not None else "?"
        out.append(
            AlertCandidate(
                workload_labels(w, NAME, severity),
                {
                    "summary": f"{w.kind} {w.namespace}/{w.name} has been refused by ResourceQuota {quota} "
                    f"for {human(w.wait_seconds)}",
                    "description": (
                        f"The controller of {w.kind} {w.namespace}/{w.name} cannot create its pods: {w.why}. "
                        f"It has been refused for {human(w.wait_seconds)} (tier {w.tier} warns after "
                        f"{human(w.warn_after)}). Nothing is queued: the scheduler never sees it."
                    ),
                    "quota": quota,
                    "wait_seconds": str(round(w.wait_seconds)),
                    **links(inp.settings, NAME, w.key),
                },
            )
        )
    return out
