"""WorkloadQuotaBlocked: the controller cannot even create the pods, its namespace's quota refuses them."""

from __future__ import annotations

from watchtower.domain.queue import WorkloadState, WorkloadStatus

from ..model import AlertCandidate
from .base import RuleInput, human, links, workload_labels

NAME = "WorkloadQuotaBlocked"
# An alert's labels are its identity: one that changes is a resolve and a new firing. So past critical the
# warning stays (muted by the critical one, as for the wait alerts) rather than resolving as it escalates.
_SEVERITIES = {"warning": ("warning",), "critical": ("warning", "critical")}


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    """Return a warning per workload refused for its tier's warn_after, and a critical one past critical."""
    out = []
    for w in inp.snapshot.workloads:
        reached = w.severity
        if w.state is not WorkloadState.QUOTA_BLOCKED or not reached:
            continue
        quota = w.quota.quota if w.quota is not None else "?"
        refused = w.quota.gpus_requested if w.quota is not None else None
        for severity in _SEVERITIES[reached]:
            labels = workload_labels(w, NAME, severity)
            if refused is not None:
                # The GPUs of the refused pod: the workload's total moves as its controller's other pods
                # finish and are replaced while the refusals go on, and would make a new alert each time.
                labels["gpus"] = str(refused)
            out.append(_candidate(inp, w, labels, quota))
    return out


def _candidate(inp: RuleInput, w: WorkloadStatus, labels: dict[str, str], quota: str) -> AlertCandidate:
    return AlertCandidate(
        labels,
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
