"""The PaddleJob form's step of a workload's facts (stage 40): a PaddleJob that wants pods holds the
workload before its pods exist, waiting on its namespace's quota, its Volcano group or paddle-operator.

After the gangs' stage: the job's pod count is what it expects, whatever group its pods are in.
"""

from __future__ import annotations

from collections.abc import Collection

from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsPass, FactsState, FactsStep, PodLess
from watchtower.domain.forms.gangs.wait import job_wait
from watchtower.domain.forms.quota.refusals import refused_priority
from watchtower.domain.messages.scheduler import explain
from watchtower.domain.queue_values import WorkloadState
from watchtower.domain.records import Controller
from watchtower.domain.workloads import WorkloadKey


class _PaddlePass(FactsPass):
    __slots__ = ("job",)

    def __init__(self, job: Controller) -> None:
        self.job = job

    def holds(self) -> bool:
        return True

    def priority(self, ctx: FactsContext, draft: FactsDraft) -> None:
        if not draft.tracked and draft.refusal is None:  # a refused controller's template comes first
            draft.priority, draft.priority_class = refused_priority(self.job, ctx.state.priority_classes)

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        job, key, live = self.job, draft.key, draft.pods_existing
        if draft.refusal is not None or draft.state not in (WorkloadState.RUNNING, WorkloadState.PENDING):
            return
        made = sum(p.gpus for p in draft.pods if not p.terminal)
        warned = ctx.state.control.operator_warnings.get(key)
        said = warned.words if warned is not None and warned.speaks_for(job, ctx.now) else ""
        jw = job_wait(
            job,
            live,
            made,
            ctx.state.control.quotas_in(key.namespace),
            ctx.state.gangs.volcano_group(key),
            said,
        )
        if jw is None:
            return
        if draft.queued:
            draft.pods_expected = job.pods
            return
        draft.source, draft.pods_expected, draft.group, draft.queue = jw.source, job.pods, jw.group, jw.queue
        if jw.quota_blocked:
            draft.state = WorkloadState.QUOTA_BLOCKED
        else:
            draft.state = WorkloadState.PARTIAL if draft.bound else WorkloadState.PENDING
        draft.since = job.created  # no pod waits: the job itself has waited since it was made
        draft.gpus_requested = max(draft.gpus_requested, job.gpus)
        draft.gpus_per_pod = draft.gpus_per_pod or job.gpus_per_pod
        draft.why = jw.why
        if jw.message:
            draft.diagnosis = ctx.diagnose(jw.message)
            draft.why = explain(draft.diagnosis, gpus=draft.gpus_per_pod, verdict=draft.preemption)


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
    job = ctx.state.control.controller(draft.key) if draft.key in ctx.state.control.expecting else None
    return _PaddlePass(job) if job is not None else None


def _expecting(state: FactsState) -> Collection[WorkloadKey]:
    return state.control.expecting


FACTS = FactsStep(
    stage=40,
    begin=_begin,
    # A controller that wants pods it has not made waits with none (state_controllers.py `expecting`).
    pod_less=PodLess(_expecting, lambda state, key: key in state.control.expecting),
)
