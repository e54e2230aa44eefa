"""WorkloadWaitWarning / WorkloadWaitCritical: a workload has waited longer than its tier allows."""

from __future__ import annotations

from watchtower.domain.queue import WorkloadState

from ..model import AlertCandidate
from .base import PREEMPTION_WORDS, RuleInput, human, links, queue_context, workload_labels

WARNING = "WorkloadWaitWarning"
CRITICAL = "WorkloadWaitCritical"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    """Return one alert per waiting workload past its warn threshold, and another past its critical one."""
    out = []
    for w in inp.snapshot.workloads:
        # Quota-blocked work has its own rule; gated work is not queued yet (DESIGN §3.4).
        if w.state not in (WorkloadState.PENDING, WorkloadState.PARTIAL):
            continue
        for name, severity, threshold in (
            (WARNING, "warning", w.warn_after),
            (CRITICAL, "critical", w.critical_after),
        ):
            if w.wait_seconds < threshold:
                continue
            what = f"{w.kind} {w.namespace}/{w.name}"
            out.append(
                AlertCandidate(
                    workload_labels(w, name, severity),
                    {
                        "summary": f"{what} ({w.tier} tier, {w.gpus_requested} GPU) has waited "
                        f"{human(w.wait_seconds)}, over its {severity} threshold of {human(threshold)}",
                        "description": (
                            f"{what} of team {w.team} has waited {human(w.wait_seconds)} "
                            f"(threshold {human(threshold)} for tier {w.tier}). "
                            f"Why: {w.why or 'no reason recorded yet'}. "
                            f"Preemption: {PREEMPTION_WORDS.get(w.preemption.value, w.preemption.value)}. "
                            + queue_context(w)
                        ),
                        "wait_seconds": str(round(w.wait_seconds)),
                        "threshold_seconds": str(round(threshold)),
                        "why": w.why,
                        "preemption": w.preemption.value,
                        "ahead_higher_tier": str(w.ahead_higher_tier),
                        **links(inp.settings, name, w.key),
                        **{f"note_{k}": v for k, v in w.annotations.items()},
                    },
                )
            )
    return out
