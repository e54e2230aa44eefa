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

from watchtower.domain.facts_draft import NEVER_UNDECIDED, FactsContext, FactsDraft, FactsStep, PodLess
from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.forms.gangs.records import SOURCE_PODGROUP, SOURCE_VOLCANO
from watchtower.domain.forms.pods.facts import is_gated
from watchtower.domain.forms.quota.refusals import QuotaRefusal
from watchtower.domain.messages.scheduler import SchedulingDiagnosis
from watchtower.domain.never import NeverStart, PodShape, kueue_never, quota_never
from watchtower.domain.queue_values import WAITING_STATES, QueuePolicy, WorkloadFacts, WorkloadState
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
    odd: Callable[[WorkloadKey, str, str, str], None] | None = None,
) -> WorkloadFacts | None:
    """Return a workload's facts from its pods (`pods`, finished ones included) and its quota refusal;
    None when nothing of it is tracked or waits. `odd` hears of input that could not be read while
    telling whether it can never start (a quota's quantity, a Kueue message), which is then skipped."""
    ctx = FactsContext(state, policy, diagnose, now, odd)
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

    never = _never(ctx, draft, odd) if draft.state in WAITING_STATES else None
    if never is not None:
        draft.why = f"{never.text} ({draft.why})" if draft.why else never.text

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
        notify=_notify(state, key, pods, draft.notify),
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
        never=never,
    )


def _never(
    ctx: FactsContext, draft: FactsDraft, odd: Callable[[WorkloadKey, str, str, str], None] | None
) -> NeverStart | None:
    """Return why a waiting workload can never start as configured: what Kueue or a quota says of it
    first (their own numbers), else what the nodes say of its pods' shape (never.py)."""
    k = draft.kueue
    if k is not None and not k.admitted:
        said, unread = kueue_never(k.reason, k.message, k.cluster_queue, draft.gpus_requested)
        if unread and odd is not None:
            odd(
                draft.key,
                "Workload",
                f"cannot tell whether it can never start: Kueue {k.reason} message without the numbers it should"
                f" carry: {k.message!r}",
                NEVER_UNDECIDED,
            )
        if said is not None:
            return said
    refusal = draft.refusal
    if draft.state is WorkloadState.QUOTA_BLOCKED and refusal is not None:
        listed = ctx.state.control.quotas.get((draft.key.namespace, refusal.quota))
        now_hard = listed.hard_gpus if listed is not None else None
        said, unreadable = quota_never(refusal.quota, refusal.requested, refusal.limited, now_hard)
        if unreadable and odd is not None:
            odd(
                draft.key,
                "ResourceQuota",
                f"cannot tell whether it can never start: ResourceQuota {refusal.quota}: unreadable quantity of"
                f" {', '.join(unreadable)}",
                NEVER_UNDECIDED,
            )
        if said is not None:
            return said
    pods = draft.queued or draft.gated
    if pods:
        shapes = {_shape(p) for p in pods}
    elif draft.gpus_per_pod > 0:  # no pod yet (refused, held): what one of them will ask
        shapes = {PodShape(draft.gpus_per_pod)}
    else:
        return None
    inventory = ctx.state.inventory()
    # Most workloads' pods ask alike: one shape, no sort (a tick derives tens of thousands).
    ordered = (
        shapes if len(shapes) == 1 else sorted(shapes, key=lambda s: (-s.gpus, -s.cpu_millis, s.selector))
    )
    for shape in ordered:
        said = inventory.verdict(shape)
        if said is not None:
            return said
    if draft.key.gang or draft.source in _GANG_SOURCES:
        # Its minimum at once, only when every pod of it asks alike (a pod not made yet asks as its siblings
        # do): a gang of mixed pods (a parameter server beside GPU workers) is not weighed, never guessed.
        alive = {_shape(p) for p in draft.pods if not p.terminal}
        if len(alive) == 1 and draft.pods_expected > 1:
            return inventory.verdict(next(iter(alive)), draft.pods_expected)
    return None


def _shape(p: Pod) -> PodShape:
    return PodShape(p.gpus, p.cpu_millis, p.memory_bytes, p.node_selector)


_GANG_SOURCES = frozenset({SOURCE_PODGROUP, SOURCE_VOLCANO})


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


def notify_of(state: ClusterState, key: WorkloadKey) -> str:
    """Return the owner-notice annotation of a workload that need not be waiting (a preemption's victim):
    its own object's, else that of its oldest pod still held that carries one; "" when none."""
    pods = sorted(
        (p for u in state.by_workload.get(key, ()) if (p := state.pods.get(u)) is not None),
        key=lambda p: p.created,
    )
    return _notify(state, key, pods, next((p.notify for p in pods if p.notify), ""))


def _notify(state: ClusterState, key: WorkloadKey, pods: list[Pod], from_pods: str) -> str:
    """Return the owner-notice annotation of a workload: its own object's (a PaddleJob's, a Job's, a
    JobSet's; for a Deployment, its pods' ReplicaSet's, which carries the Deployment's annotations), else
    its pods' (`from_pods`); the workload's is the one its author wrote for the whole of it."""
    own = state.control.controller(key)
    if own is None:
        # A workload whose object is not held (a Deployment): the controller its pods name.
        refs = {p.owner for p in pods if p.owner is not None}
        for r in sorted(refs, key=lambda r: (r.kind, r.name)):
            c = state.control.controller(WorkloadKey(key.namespace, r.kind, r.name))
            if c is not None and c.notify:
                return c.notify
    return own.notify if own is not None and own.notify else from_pods
