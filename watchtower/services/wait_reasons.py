"""Why a workload waits, as one bounded label: what the pending gauge counts it by.

The label is the reason most nodes gave the scheduler, or, when the scheduler said nothing, the word the
work's own state gives (quota, an incomplete gang, Kueue, a scheduling gate). `ReasonLabels` keeps each diagnosis's label: a
queue has a few dozen distinct diagnoses (the evaluator shares them) over 20,000 waits.
"""

from __future__ import annotations

from watchtower.domain.forms.gangs.records import SOURCE_PADDLEJOB, SOURCE_PODGROUP, SOURCE_VOLCANO
from watchtower.domain.forms.kueue.records import SOURCE_KUEUE
from watchtower.domain.messages.scheduler import NO_NODES, SchedulingDiagnosis
from watchtower.domain.queue import WorkloadFacts, WorkloadState, WorkloadStatus


def main_reason(w: WorkloadStatus) -> str:
    """Return a bounded label for why a workload waits: the reason most nodes gave, or the state's."""
    if w.state is WorkloadState.QUOTA_BLOCKED:
        return "quota"
    d = w.diagnosis
    return held_reason(w.facts) if d is None else diagnosis_reason(d)


def held_reason(f: WorkloadFacts) -> str:
    """Return the label of a wait the scheduler said nothing about: the work's own object says why
    (gang-held work has no condition)."""
    if f.scheduling_reason == "SchedulingGated":
        # Held by scheduling gates, whoever owns them (forms/gated): the gate is the reason, even where
        # the Kueue Workload of a plain-pod group is known.
        return "gated"
    if f.source in (SOURCE_PODGROUP, SOURCE_VOLCANO) and f.pods_expected > f.pods_existing:
        return "gang_incomplete"
    if f.source == SOURCE_PADDLEJOB:
        return "no_pods" if f.pods_existing == 0 else "pods_missing"
    if f.source == SOURCE_KUEUE:
        return "kueue"
    return "not_tried"


def diagnosis_reason(d: SchedulingDiagnosis) -> str:
    """Return the label of the scheduler's diagnosis: the reason most nodes gave."""
    if d.reasons:
        top = max(d.reasons, key=lambda r: (r.nodes, r.reason))
        return top.reason if len(top.reason) <= 64 else "other"
    if d.raw.startswith(NO_NODES):
        return "no_nodes"
    return "other"


class ReasonLabels:
    """`main_reason` of listed facts, each diagnosis's label worked out once."""

    def __init__(self) -> None:
        self._known: dict[int, tuple[SchedulingDiagnosis, str]] = {}

    def pending(self, f: WorkloadFacts) -> str:
        """Return the pending gauge's reason label of a waiting workload."""
        if f.state is WorkloadState.QUOTA_BLOCKED:
            return "quota"
        if f.diagnosis is None:
            return held_reason(f)
        return self.of(f.diagnosis)

    def of(self, d: SchedulingDiagnosis) -> str:
        """Return the label of a diagnosis, worked out the first time it is seen."""
        # Keyed by identity, the diagnosis kept beside its label: a few dozen distinct ones a queue.
        labels = self._known
        known = labels.get(id(d))
        if known is None or known[0] is not d:
            if len(labels) > 10_000:  # diagnoses the evaluator has long dropped
                labels.clear()
            known = labels[id(d)] = (d, diagnosis_reason(d))
        return known[1]
