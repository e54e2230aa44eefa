"""The Kueue form's step of a workload's facts (stage 50, the last word): a job Kueue holds waits for
admission with no pod, ordered by its Workload's priority; once admitted its pods say the rest. Its pod
sets' DRA claims stand for its pods' while it has none.
"""

from __future__ import annotations

from watchtower.domain.facts_draft import (
    NOT_REAL_WORK,
    FactsContext,
    FactsDraft,
    FactsPass,
    FactsState,
    FactsStep,
    PodLess,
)
from watchtower.domain.forms.kueue.dra import pod_set_gpu_claims
from watchtower.domain.forms.kueue.records import KueueWorkload
from watchtower.domain.forms.kueue.wait import kueue_wait
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue_values import WorkloadState
from watchtower.domain.workloads import WorkloadKey


class _KueuePass(FactsPass):
    __slots__ = ("kw",)

    def __init__(self, kw: KueueWorkload) -> None:
        self.kw = kw

    def holds(self) -> bool:
        return True

    def priority(self, ctx: FactsContext, draft: FactsDraft) -> None:
        # Kueue orders it by its Workload's priority (a WorkloadPriorityClass, maybe), pods or not.
        draft.priority, draft.priority_class = ctx.state.kueue_priority(self.kw)

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        kw = self.kw
        kq = kueue_wait(ctx.state.kueue, kw, queued=bool(draft.queued), bound=len(draft.bound))
        draft.kueue = kq.facts
        if kq.state is not None:
            draft.state = WorkloadState(kq.state)
        if kq.since is not None and draft.state is not WorkloadState.RUNNING:
            draft.since = kq.since
        if kq.why:
            draft.why, draft.source, draft.scheduling_reason, draft.diagnosis = (
                kq.why,
                kq.source,
                kq.reason,
                None,
            )
            draft.preemption = PreemptionVerdict.UNKNOWN
            draft.gpus_requested = max(draft.gpus_requested, kw.gpus_asked)
            draft.gpus_per_pod = draft.gpus_per_pod or kw.per_pod_asked
            draft.pods_expected = max(draft.pods_expected, kw.pods)
        if not draft.gpu_claims and kw.dra is not None:  # no pod yet: what its pod sets will claim
            draft.gpu_claims = {gc.name: gc for gc in pod_set_gpu_claims(ctx.state.dra, kw)}


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
    kueue, key = ctx.state.kueue, draft.key
    kw = kueue.of_key(key) if key in kueue.held else None
    if kw is None or kw.finished or not (kw.active or kw.reserved):
        return None
    if kw.owner is None and key not in ctx.state.by_workload:
        # No job owns it and none of its pods is seen: a plain-pod group's Workload (Kueue makes it from the
        # group's pods, each an owner without a controller reference) whose pods are gone. Nothing of it can
        # run, so it is not waiting work: skipped, and said once.
        if ctx.odd is not None:
            ctx.odd(
                key,
                "KueueWorkload",
                "a Kueue Workload no job owns, naming pods that do not exist: not listed",
                NOT_REAL_WORK,
            )
        return None
    if ctx.policy.selector.require_gpu and kw.gpus_asked <= 0 and not draft.tracked:
        return None
    return _KueuePass(kw)


def _held(state: FactsState) -> set[WorkloadKey]:
    return state.kueue.held


def _may_wait(state: FactsState, key: WorkloadKey) -> bool:
    # Not admitted yet, or admitted with no pod made yet: an admitted job whose pods are there is listed
    # by its waiting pods, or not at all.
    if key not in state.kueue.held:
        return False
    w = state.kueue.of_key(key)
    return w is not None and (w.waiting or key not in state.by_workload)


HELD = PodLess(_held, _may_wait)
FACTS = FactsStep(stage=50, begin=_begin, pod_less=HELD)
