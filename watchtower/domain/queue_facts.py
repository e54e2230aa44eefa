"""A workload's facts: its state, wait, tier and the words of why, from its pods and what it waits on.

The evaluator (queue.py) decides which workloads to re-derive; this works one of them out from the
state: its pods, a quota refusal, its pod group, and a PaddleJob that waits before its pods.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping

from watchtower.domain.forms.dra.records import GpuClaim
from watchtower.domain.forms.gangs.records import SOURCE_PODS, SOURCE_QUOTA
from watchtower.domain.forms.gangs.wait import group_wait, job_wait
from watchtower.domain.forms.kueue.dra import pod_set_gpu_claims
from watchtower.domain.forms.kueue.wait import kueue_wait
from watchtower.domain.forms.quota.refusals import QuotaRefusal, refused_gpus, refused_priority
from watchtower.domain.messages.scheduler import PreemptionVerdict, SchedulingDiagnosis, explain
from watchtower.domain.queue_values import QueuePolicy, WorkloadFacts, WorkloadState
from watchtower.domain.records import Pod

from .state import ClusterState
from .workloads import WorkloadKey


def is_gated(pod: Pod) -> bool:
    c = pod.scheduled
    return pod.scheduling_gated or (c is not None and c.status == "False" and c.reason == "SchedulingGated")


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
    if refusal is not None and pods and max(p.created for p in pods) > (refusal.last or 0.0):
        # The controller created a pod after its last refusal: that refusal is history, not a block.
        refusal = None
    tracked = [p for p in pods if not p.terminal and policy.selector.matches(p)]
    job = state.control.controller(key) if key in state.control.expecting else None
    kw = state.kueue.of_key(key) if key in state.kueue.held else None
    if kw is not None and (
        kw.finished
        or not (kw.active or kw.reserved)
        or (policy.selector.require_gpu and kw.gpus_asked <= 0 and not tracked)
    ):
        kw = None
    if not tracked and refusal is None and job is None and kw is None:
        return None
    queued: list[Pod] = []
    gated: list[Pod] = []
    bound: list[Pod] = []
    for p in tracked:
        if p.holds_resources:
            bound.append(p)
        elif p.waiting:
            (gated if is_gated(p) else queued).append(p)

    notes: Mapping[str, str] = {}
    if tracked:
        notes = min(tracked, key=lambda p: (p.created, p.name)).annotations
        top = max(tracked, key=lambda p: p.priority)
        priority, pclass = top.priority, top.priority_class
    else:
        # No pod to read it from: the refused controller's template says what its pods would be.
        ctrl = state.control.controller(refusal.refused_by) if refusal is not None else job
        priority, pclass = refused_priority(ctrl, state.priority_classes)
    if kw is not None:  # Kueue orders it by its Workload's priority (a WorkloadPriorityClass, maybe)
        priority, pclass = state.kueue_priority(kw)
    tier = policy.tiers.tier_of(priority, pclass)

    diag: SchedulingDiagnosis | None = None
    sreason = ""
    verdict = PreemptionVerdict.UNKNOWN
    nominated = oldest_name = ""
    since: float | None = None
    if queued:
        rep = min(queued, key=lambda p: (p.created, p.name))
        since, oldest_name, nominated = rep.created, rep.name, rep.nominated_node
        c = rep.scheduled
        if c is not None and c.status == "False":
            sreason = c.reason
            diag = diagnose(c.message)
            verdict = diag.preemption
        if rep.preemption_policy == "Never":
            verdict = PreemptionVerdict.POLICY_NEVER
        elif rep.nominated_node:
            verdict = PreemptionVerdict.POSSIBLE
        state_ = WorkloadState.PARTIAL if bound else WorkloadState.PENDING
    elif refusal is not None:
        state_ = WorkloadState.QUOTA_BLOCKED
        since = refusal.first
        sreason = "FailedCreate"
    elif gated:
        state_ = WorkloadState.GATED
        rep = min(gated, key=lambda p: (p.created, p.name))
        since, oldest_name, sreason = rep.created, rep.name, "SchedulingGated"
    else:
        state_ = WorkloadState.RUNNING

    gpus_per_pod = max((p.gpus for p in queued), default=0)
    gpus_requested = sum(p.gpus for p in tracked)
    if state_ is WorkloadState.QUOTA_BLOCKED and refusal is not None:
        missing, gpus_per_pod = refused_gpus(state.control.controller(refusal.refused_by), refusal, tracked)
        gpus_requested += missing
    if state_ is WorkloadState.QUOTA_BLOCKED and refusal is not None:
        why = f"refused by ResourceQuota {refusal.quota}: {_quota_words(refusal)}"
    elif state_ is WorkloadState.GATED:
        why = "held by scheduling gates: not queued yet"
    elif diag is not None:
        why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
    elif queued:
        held = state.dra.held_by(rep.namespace, rep.claims) if rep.claims else ""
        why = f"held before the queue (DRA): {held}" if held else "waiting for the scheduler to try it"
    else:
        why = ""
    source = SOURCE_QUOTA if state_ is WorkloadState.QUOTA_BLOCKED else SOURCE_PODS
    expected, group, queue = 0, "", ""
    live = sum(1 for p in pods if not p.terminal)
    ref = next((p.group for p in tracked if p.group is not None), None)
    if ref is not None and queued:
        gang, min_count = state.gangs.gang_of(ref, key.namespace)
        gw = group_wait(ref, gang, min_count, live)
        if gw is not None:
            source, expected, group, queue = gw.source, gw.pods_expected, gw.group, gw.queue
            if gang is not None and gang.uid and state.ledger.group_victims.get(gang.uid):
                # The gang preempts as a whole; its victims are terminating (no node is nominated).
                verdict = PreemptionVerdict.POSSIBLE
            if expected > live and gpus_per_pod:
                # The pods not made yet: a gang's pods ask alike, and the group is what the user sized.
                gpus_requested += (expected - live) * gpus_per_pod
            if gw.why:
                why = gw.why
            elif gw.message and (diag is None or not diag.raw.strip()):
                diag = diagnose(gw.message)
                why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
            elif diag is not None:
                why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
    if job is not None and refusal is None and state_ in (WorkloadState.RUNNING, WorkloadState.PENDING):
        made = sum(p.gpus for p in pods if not p.terminal)
        warned = state.control.operator_warnings.get(key)
        said = warned.words if warned is not None and warned.speaks_for(job, now) else ""
        jw = job_wait(
            job, live, made, state.control.quotas_in(key.namespace), state.gangs.volcano_group(key), said
        )
        if jw is not None and not queued:
            source, expected, group, queue = jw.source, job.pods, jw.group, jw.queue
            if jw.quota_blocked:
                state_ = WorkloadState.QUOTA_BLOCKED
            else:
                state_ = WorkloadState.PARTIAL if bound else WorkloadState.PENDING
            since = job.created  # no pod waits: the job itself has waited since it was made
            gpus_requested = max(gpus_requested, job.gpus)
            gpus_per_pod = gpus_per_pod or job.gpus_per_pod
            why = jw.why
            if jw.message:
                diag = diagnose(jw.message)
                why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
        elif jw is not None:
            expected = job.pods
    kfacts = None
    if kw is not None:
        kq = kueue_wait(state.kueue, kw, queued=bool(queued), bound=len(bound))
        kfacts = kq.facts
        if kq.state is not None:
            state_ = WorkloadState(kq.state)
        if kq.since is not None and state_ is not WorkloadState.RUNNING:
            since = kq.since
        if kq.why:
            why, source, sreason, diag = kq.why, kq.source, kq.reason, None
            verdict = PreemptionVerdict.UNKNOWN
            gpus_requested = max(gpus_requested, kw.gpus_asked)
            gpus_per_pod = gpus_per_pod or kw.per_pod_asked
            expected = max(expected, kw.pods)
    if state_ is WorkloadState.PARTIAL:
        why = f"gang partly placed: {len(bound)} pod(s) hold {sum(p.gpus for p in bound)} GPU(s), " + why

    claims: dict[str, GpuClaim] = {}
    for p in tracked:
        if p.claims:
            for gc in state.dra.gpu_claims(p.namespace, p.claims):
                claims.setdefault(gc.name, gc)
    if not claims and kw is not None and kw.dra is not None:  # no pod yet: what its pod sets will claim
        claims = {gc.name: gc for gc in pod_set_gpu_claims(state.dra, kw)}

    return WorkloadFacts(
        key=key,
        team=state.team_of(key.namespace),
        tier=tier.name,
        priority=priority,
        priority_class=pclass,
        state=state_,
        since=since,
        warn_after=tier.warn_after,
        critical_after=tier.critical_after,
        gpus_requested=gpus_requested,
        gpus_held=sum(p.gpus for p in bound),
        gpus_per_pod=gpus_per_pod,
        pods_pending=len(queued),
        pods_running=len(bound),
        pods_gated=len(gated),
        diagnosis=diag,
        scheduling_reason=sreason,
        preemption=verdict,
        why=why,
        nominated_node=nominated,
        oldest_pod=oldest_name,
        quota=refusal if state_ is WorkloadState.QUOTA_BLOCKED else None,
        preemptions_recent=thrash.get(key, 0),
        annotations=notes,
        source=source,
        pods_expected=expected,
        pods_existing=live,
        group=group,
        queue=queue,
        gpu_claims=tuple(claims[n] for n in sorted(claims)),
        order=(
            policy.tiers.rank(tier.name),
            -priority,
            since if since is not None else float("inf"),
            key,
        ),
        kueue=kfacts,
    )


def _quota_words(q: QuotaRefusal) -> str:
    parts = []
    for res, want in sorted(q.requested.items()):
        parts.append(f"{res} requested {want}, used {q.used.get(res, '?')} of {q.limited.get(res, '?')}")
    return "; ".join(parts) or q.message
