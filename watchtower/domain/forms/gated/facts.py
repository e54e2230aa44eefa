"""The gated form's step of a workload's facts (stage 60, after Kueue's): a workload whose pods are all
gated (none queued) waits from its gated pods' earliest creation, attributed to the system that holds the
gate: Kueue (a plain-pod group, joined with its Workload), Volcano (its PodGroup's queue), or the gate
itself when no known system owns it. Only a gate `queue.expected_gates` names keeps the old `gated` state:
listed, never alerted.
"""

from __future__ import annotations

from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsPass, FactsStep
from watchtower.domain.forms.gangs.records import REF_VOLCANO, SOURCE_VOLCANO
from watchtower.domain.forms.gated.records import (
    KUEUE_POD_GROUP_LABEL,
    OWNER_KUEUE,
    OWNER_OTHER,
    OWNER_VOLCANO,
    GatedFacts,
    gate_owner,
)
from watchtower.domain.forms.gated.words import gate_words, kueue_words, volcano_words
from watchtower.domain.forms.pods.facts import is_gated
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue_values import WorkloadState

NAME = "gated"


class _GatedPass(FactsPass):
    __slots__ = ()

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        gated = draft.gated
        if not gated:
            return
        gates = tuple(sorted({g for p in gated for g in p.gates}))
        owner = gate_owner(gates)
        since = min(p.created for p in gated)
        patterns = ctx.policy.expected_gates
        expected = (
            owner == OWNER_OTHER
            and bool(gates)
            and bool(patterns)
            and all(any(rx.matches(g) for rx in patterns) for g in gates)
        )
        draft.form_facts[NAME] = GatedFacts(owner, gates, since, expected)
        if draft.queued or draft.state is WorkloadState.QUOTA_BLOCKED:
            return  # its queued pods (or its refusal) say the wait; the gated ones are counted
        per_pod = max(p.gpus for p in gated)
        draft.gpus_per_pod = draft.gpus_per_pod or per_pod
        draft.scheduling_reason, draft.diagnosis = "SchedulingGated", None
        draft.preemption = PreemptionVerdict.UNKNOWN
        if expected:
            draft.state, draft.since = WorkloadState.GATED, since
            draft.why = gate_words(gates, since, expected=True)
            return
        draft.state = WorkloadState.PARTIAL if draft.bound else WorkloadState.PENDING
        draft.since = since if draft.since is None else min(since, draft.since)
        if owner == OWNER_KUEUE:
            total = max(p.group_total for p in draft.pods)
            draft.pods_expected = max(draft.pods_expected, total)
            if total > draft.pods_existing:
                # The group's pods not made yet ask alike; Kueue admits the group whole.
                draft.gpus_requested = max(
                    draft.gpus_requested,
                    sum(p.gpus for p in draft.tracked) + (total - draft.pods_existing) * per_pod,
                )
            group = next((p.labels.get(KUEUE_POD_GROUP_LABEL, "") for p in gated), "")
            draft.why = kueue_words(draft.kueue, group)
        elif owner == OWNER_VOLCANO:
            ref = next(
                (p.group for p in gated if p.group is not None and p.group.source == REF_VOLCANO), None
            )
            gangs = ctx.state.gangs
            gang = gangs.gang_of(ref, draft.key.namespace)[0] if ref is not None else None
            queue = gang.queue if gang is not None else ""
            if gang is not None:
                draft.source, draft.group, draft.queue = SOURCE_VOLCANO, gang.name, queue
                draft.pods_expected = max(draft.pods_expected, gang.min_count)
            draft.why = volcano_words(queue, gangs.queues.get(queue) if queue else None)
        else:
            draft.why = gate_words(gates, since, expected=False)


_PASS = _GatedPass()


def _begin(ctx: FactsContext, draft: FactsDraft) -> FactsPass | None:
    return _PASS if any(p.waiting and is_gated(p) for p in draft.tracked) else None


FACTS = FactsStep(stage=60, begin=_begin)
