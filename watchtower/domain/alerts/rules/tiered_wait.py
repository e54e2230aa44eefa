"""WorkloadWaitWarning / WorkloadWaitCritical: a workload has waited longer than its tier allows."""

from __future__ import annotations

from watchtower.domain.messages.scheduler import preemption_note
from watchtower.domain.queue import WorkloadState

from ..model import AlertCandidate
from .base import RuleInput, human, links, queue_context, workload_labels

WARNING = "WorkloadWaitWarning"
CRITICAL = "WorkloadWaitCritical"
# Past its critical threshold a workload has both alerts: the warning stays while the critical one fires.
_ALERTS = {"warning": ((WARNING, "warning"),), "critical": ((WARNING, "warning"), (CRITICAL, "critical"))}


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    """Return one alert per waiting workload past its warn threshold, and another past its critical one."""
    out = []
    waiting = (WorkloadState.PENDING, WorkloadState.PARTIAL)
    for w in inp.snapshot.workloads:
        # Quota-blocked work has its own rule; `gated` is work held only by `queue.expected_gates` (forms/gated),
        # expected to hold for long: other gated work is pending or partial, and alerted here.
        reached = w.severity
        if not reached or w.state not in waiting:
            continue
        wait = w.wait_seconds
        # What both severities share is worked out once: a storm renders 10,000 of these a tick.
        key = w.key
        what = f"{key.kind} {key.namespace}/{key.name}"
        waited = human(wait)
        common = {
            "wait_seconds": str(round(wait)),
            "why": w.why,
            "preemption": w.preemption.value,
            "ahead_higher_tier": str(w.ahead_higher_tier),
        }
        notes = {f"note_{k}": v for k, v in w.annotations.items()}
        estimate = inp.waits.estimate(w) if inp.waits is not None else None
        if estimate is not None:
            # No place (a Kueue-held job, pods not made yet): the annotation is left out, never "None".
            if estimate.position is not None:
                common["position_in_tier"] = str(estimate.position)
            common["start_estimate"] = estimate.text
        # The why usually words the verdict already (explain()); it is said apart only when it does not.
        note = preemption_note(w.why, w.preemption)
        detail = (
            f"Why: {w.why or 'no reason recorded yet'}. "
            + (f"Preemption: {note}. " if note else "")
            + queue_context(w)
        )
        for name, severity in _ALERTS[reached]:
            threshold = w.critical_after if severity == "critical" else w.warn_after
            limit = human(threshold)
            out.append(
                AlertCandidate(
                    workload_labels(w, name, severity),
                    {
                        "summary": f"{what} ({w.tier} tier, {w.gpus_requested} GPU) has waited "
                        f"{waited}, over its {severity} threshold of {limit}",
                        "description": f"{what} of team {w.team} has waited {waited} "
                        f"(threshold {limit} for tier {w.tier}). {detail}",
                        **common,
                        "threshold_seconds": str(round(threshold)),
                        **links(inp.settings, name, key),
                        **notes,
                    },
                )
            )
    return out
