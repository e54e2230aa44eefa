"""A workload's facts: its state, wait, tier and the words of why, from its pods and what it waits on.

The evaluator (queue.py) decides which workloads to re-derive; this works one of them out from the
state by running the registered forms' steps (`QueueForm.facts`, facts_draft.py) over a draft: the pods'
first, then what each form adds (a quota refusal, DRA claims, a pod group, a PaddleJob that waits before
its pods, a Kueue Workload). A form adds its facts in its own slice, not here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from types import MappingProxyType

from watchtower.domain.facts_draft import FactsContext, FactsDraft, FactsStep, PodLess
from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.pods.facts import is_gated
from watchtower.domain.forms.quota.refusals import QuotaRefusal
from watchtower.domain.messages.scheduler import SchedulingDiagnosis
from watchtower.domain.queue_values import QueuePolicy, WorkloadFacts, WorkloadState
from watchtower.domain.records import Pod

from .state import ClusterState
from .workloads import WorkloadKey

__all__ = ["is_gated", "pod_less", "workload_facts"]


def workload_facts(
    state: ClusterState,
    key: WorkloadKey,
    pods: list[Pod],
    refusal: QuotaRefusal | None,
    now: float,
    thrash: Counter[WorkloadKey],
    *,
    policy: QueuePolicy,
    diagnose: Callable[[str], SchedulingDiagnosis],
) -> WorkloadFacts | None:
    """Return a workload's facts from its pods (`pods`, finished ones included) and its quota refusal;
    None when nothing of it is tracked or waits."""
    ctx = FactsContext(state, policy, diagnose, now)
    tracked = [p for p in pods if not p.terminal and policy.selector.matches(p)]
    draft = FactsDraft(key, pods, tracked, refusal, pods_existing=sum(1 for p in pods if not p.terminal))
    passes = [fp for step in _steps(registry.FORMS) if (fp := step.begin(ctx, draft)) is not None]
    if not tracked and not any(fp.holds() for fp in passes):
        return None
    for fp in passes:
        fp.priority(ctx, draft)
    for fp in passes:
        fp.refine(ctx, draft)
    if draft.state is WorkloadState.PARTIAL:
        # Whichever form left it partial, what is already placed comes first.
        placed = f"{len(draft.bound)} pod(s) hold {sum(p.gpus for p in draft.bound)} GPU(s)"
        draft.why = f"gang partly placed: {placed}, " + draft.why

    tier = policy.tiers.tier_of(draft.priority, draft.priority_class)
    claims = draft.gpu_claims
    return WorkloadFacts(
        key=key,
        team=state.team_of(key.namespace),
        tier=tier.name,
        priority=draft.priority,
        priority_class=draft.priority_class,
        state=draft.state,
        since=draft.since,
        warn_after=tier.warn_after,
        critical_after=tier.critical_after,
        gpus_requested=draft.gpus_requested,
        gpus_held=sum(p.gpus for p in draft.bound),
        gpus_per_pod=draft.gpus_per_pod,
        pods_pending=len(draft.queued),
        pods_running=len(draft.bound),
        pods_gated=len(draft.gated),
        diagnosis=draft.diagnosis,
        scheduling_reason=draft.scheduling_reason,
        preemption=draft.preemption,
        why=draft.why,
        nominated_node=draft.nominated_node,
        oldest_pod=draft.oldest_pod,
        quota=draft.refusal if draft.state is WorkloadState.QUOTA_BLOCKED else None,
        preemptions_recent=thrash.get(key, 0),
        annotations=draft.annotations,
        notify=draft.notify,
        source=draft.source,
        pods_expected=draft.pods_expected,
        pods_existing=draft.pods_existing,
        group=draft.group,
        queue=draft.queue,
        gpu_claims=tuple(claims[n] for n in sorted(claims)),
        order=(
            policy.tiers.rank(tier.name),
            -draft.priority,
            draft.since if draft.since is not None else float("inf"),
            key,
        ),
        kueue=draft.kueue,
        # Most workloads have none: one shared empty mapping rather than a dict each (tens of thousands).
        form_facts=draft.form_facts or _NO_FORM_FACTS,
    )


_NO_FORM_FACTS: Mapping[str, object] = MappingProxyType({})

# The last list of forms seen and its steps: a tick re-derives tens of thousands of workloads, and hashing
# the forms for a dict or functools.cache costs more than deriving one (13 µs against ~12); an identity
# check costs nothing. A test's own list of forms simply replaces it.
_last: list[tuple[tuple[QueueForm, ...], tuple[FactsStep, ...]]] = [((), ())]


def _steps(forms: tuple[QueueForm, ...]) -> tuple[FactsStep, ...]:
    """Return the forms' steps by stage (ties in the forms' order), sorted once per list of forms."""
    seen, steps = _last[0]
    if seen is not forms:
        steps = tuple(sorted((f.facts for f in forms if f.facts is not None), key=lambda s: s.stage))
        _last[0] = (forms, steps)
    return steps


def pod_less() -> tuple[PodLess, ...]:
    """Return how each registered form holds work with no pod queued (`FactsStep.pod_less`)."""
    return tuple(s.pod_less for s in _steps(registry.FORMS) if s.pod_less is not None)
