"""The quota form's step of a workload's facts (stage 10): a ResourceQuota refusal holds it with no pod
queued, from when it was first refused, with the GPUs its controller still wants.
"""

from __future__ import annotations

from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsPass, FactsStep
from watchtower.domain.forms.gangs.records import SOURCE_QUOTA
from watchtower.domain.forms.quota.refusals import QuotaRefusal, refused_gpus, refused_priority
from watchtower.domain.queue_values import WorkloadState


class _QuotaPass(FactsPass):
    __slots__ = ("refusal",)

    def __init__(self, refusal: QuotaRefusal) -> None:
        self.refusal = refusal

    def holds(self) -> bool:
        return True

    def priority(self, ctx: FactsContext, draft: FactsDraft) -> None:
        if not draft.tracked:
            # No pod to read it from: the refused controller's template says what its pods would be.
            ctrl = ctx.state.control.controller(self.refusal.refused_by)
            draft.priority, draft.priority_class = refused_priority(ctrl, ctx.state.priority_classes)

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        if draft.queued:  # its pods queue: the pods say why
            return
        refusal = self.refusal
        draft.state = WorkloadState.QUOTA_BLOCKED
        draft.since, draft.scheduling_reason, draft.oldest_pod = refusal.first, "FailedCreate", ""
        missing, draft.gpus_per_pod = refused_gpus(
            ctx.state.control.controller(refusal.refused_by), refusal, draft.tracked
        )
        draft.gpus_requested += missing
        draft.why = f"refused by ResourceQuota {refusal.quota}: {_quota_words(refusal)}"
        draft.source = SOURCE_QUOTA


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
    refusal = draft.refusal
    if refusal is not None and draft.pods and max(p.created for p in draft.pods) > (refusal.last or 0.0):
        # The controller created a pod after its last refusal: that refusal is history, not a block.
        draft.refusal = refusal = None
    return _QuotaPass(refusal) if refusal is not None else None


def _quota_words(q: QuotaRefusal) -> str:
    parts = []
    for res, want in sorted(q.requested.items()):
        parts.append(f"{res} requested {want}, used {q.used.get(res, '?')} of {q.limited.get(res, '?')}")
    return "; ".join(parts) or q.message


FACTS = FactsStep(stage=10, begin=_begin)
