"""The gangs form's step of a workload's facts (stage 30): the pod group its queued pods wait in (an
upstream PodGroup, a Volcano PodGroup in its queue) with its minimum, and the group's words when its pods
have none.

After DRA's stage (the group's words win) and before the PaddleJob's (a PaddleJob's pod count is the
gang's size when its pods sit in a Volcano group).
"""

from __future__ import annotations

from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsPass, FactsStep
from watchtower.domain.forms.gangs.records import GroupRef
from watchtower.domain.forms.gangs.wait import group_wait
from watchtower.domain.messages.scheduler import PreemptionVerdict, explain


class _GangPass(FactsPass):
    __slots__ = ("ref",)

    def __init__(self, ref: GroupRef) -> None:
        self.ref = ref

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        if not draft.queued:
            return
        live = draft.pods_existing
        gang, min_count = ctx.state.gangs.gang_of(self.ref, draft.key.namespace)
        gw = group_wait(self.ref, gang, min_count, live)
        if gw is None:
            return
        draft.source, draft.pods_expected, draft.group, draft.queue = (
            gw.source,
            gw.pods_expected,
            gw.group,
            gw.queue,
        )
        if gang is not None and gang.uid and ctx.state.ledger.group_victims.get(gang.uid):
            # The gang preempts as a whole; its victims are terminating (no node is nominated).
            draft.preemption = PreemptionVerdict.POSSIBLE
        expected, per_pod = draft.pods_expected, draft.gpus_per_pod
        if expected > live and per_pod:
            # The pods not made yet: a gang's pods ask alike, and the group is what the user sized.
            draft.gpus_requested += (expected - live) * per_pod
        diag = draft.diagnosis
        if gw.why:
            draft.why = gw.why
        elif gw.message and (diag is None or not diag.raw.strip()):
            draft.diagnosis = ctx.diagnose(gw.message)
            draft.why = explain(draft.diagnosis, gpus=per_pod, verdict=draft.preemption)
        elif diag is not None:
            draft.why = explain(diag, gpus=per_pod, verdict=draft.preemption)


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
    ref = next((p.group for p in draft.tracked if p.group is not None), None)
    return _GangPass(ref) if ref is not None else None


FACTS = FactsStep(stage=30, begin=_begin)
