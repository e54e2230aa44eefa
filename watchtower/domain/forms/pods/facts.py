"""The pods' step of a workload's facts (stage 0): its tracked pods sorted into queued, gated and bound,
the scheduler's diagnosis of the oldest queued one, and the state, wait, GPUs and words they give.

Every later stage refines this; with no pod tracked it only chooses the priority the pods would get.
"""

from __future__ import annotations

from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsPass, FactsStep
from watchtower.domain.forms.gangs.records import SOURCE_PODS
from watchtower.domain.forms.quota.refusals import refused_priority
from watchtower.domain.messages.scheduler import PreemptionVerdict, explain
from watchtower.domain.queue_values import WorkloadState
from watchtower.domain.records import Pod


def is_gated(pod: Pod) -> bool:
    c = pod.scheduled
    return pod.scheduling_gated or (c is not None and c.status == "False" and c.reason == "SchedulingGated")


class _PodsPass(FactsPass):
    __slots__ = ()

    def priority(self, ctx: FactsContext, draft: FactsDraft) -> None:
        if draft.tracked:
            top = max(draft.tracked, key=lambda p: p.priority)
            draft.priority, draft.priority_class = top.priority, top.priority_class
        else:
            # No pod and no template (the forms that hold it say theirs): the cluster's default class.
            draft.priority, draft.priority_class = refused_priority(None, ctx.state.priority_classes)

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        queued, gated, bound = draft.queued, draft.gated, draft.bound
        for p in draft.tracked:
            if p.holds_resources:
                bound.append(p)
            elif p.waiting:
                (gated if is_gated(p) else queued).append(p)
        if draft.tracked:
            draft.annotations = min(draft.tracked, key=lambda p: (p.created, p.name)).annotations
            noting = [p for p in draft.tracked if p.notify]
            if noting:
                draft.notify = min(noting, key=lambda p: (p.created, p.name)).notify
        if queued:
            rep = draft.oldest_queued = min(queued, key=lambda p: (p.created, p.name))
            draft.since, draft.oldest_pod, draft.nominated_node = rep.created, rep.name, rep.nominated_node
            c = rep.scheduled
            if c is not None and c.status == "False":
                draft.scheduling_reason = c.reason
                draft.diagnosis = ctx.diagnose(c.message)
                draft.preemption = draft.diagnosis.preemption
            if rep.preemption_policy == "Never":
                draft.preemption = PreemptionVerdict.POLICY_NEVER
            elif rep.nominated_node:
                draft.preemption = PreemptionVerdict.POSSIBLE
            draft.state = WorkloadState.PARTIAL if bound else WorkloadState.PENDING
        elif gated:
            draft.state = WorkloadState.GATED
            rep = min(gated, key=lambda p: (p.created, p.name))
            draft.since, draft.oldest_pod, draft.scheduling_reason = rep.created, rep.name, "SchedulingGated"
        else:
            draft.state = WorkloadState.RUNNING
        draft.gpus_per_pod = max((p.gpus for p in queued), default=0)
        draft.gpus_requested = sum(p.gpus for p in draft.tracked)
        if draft.state is WorkloadState.GATED:
            draft.why = "held by scheduling gates: not queued yet"
        elif draft.diagnosis is not None:
            draft.why = explain(draft.diagnosis, gpus=draft.gpus_per_pod, verdict=draft.preemption)
        elif queued:
            draft.why = "waiting for the scheduler to try it"
        else:
            draft.why = ""
        draft.source = SOURCE_PODS


_PASS = _PodsPass()


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass:
    return _PASS


FACTS = FactsStep(stage=0, begin=_begin)
