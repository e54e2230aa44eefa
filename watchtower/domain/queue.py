"""The queue: which workloads wait, for how long, why, and what they hold while they wait.

The evaluator lives here; the values it builds are in queue_model.py, re-exported so readers import them
from either.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from .capacity import capacity
from .disruptions import Preemption
from .gang_wait import group_wait, job_wait
from .gangs import SOURCE_PODS, SOURCE_QUOTA
from .messages import PreemptionVerdict, SchedulingDiagnosis, explain, parse_scheduling_message
from .model import Pod
from .queue_model import (
    WAITING_STATES,
    Fragmentation,
    QueuePolicy,
    QueueSnapshot,
    RecentPreemptions,
    TrainingSelector,
    WorkloadFacts,
    WorkloadState,
    WorkloadStatus,
)
from .quota import QuotaRefusal, refused_gpus, refused_priority
from .state import ClusterState
from .workloads import WorkloadKey

__all__ = [
    "GANG_PREEMPTION_GAP",
    "WAITING_STATES",
    "Fragmentation",
    "QueueEvaluator",
    "QueuePolicy",
    "QueueSnapshot",
    "RecentPreemptions",
    "TrainingSelector",
    "WorkloadFacts",
    "WorkloadState",
    "WorkloadStatus",
    "is_gated",
]


def is_gated(pod: Pod) -> bool:
    c = pod.scheduled
    return pod.scheduling_gated or (c is not None and c.status == "False" and c.reason == "SchedulingGated")


# Seconds between two preemptions of one workload for them to count as two (a gang's pods go within seconds).
GANG_PREEMPTION_GAP = 60.0


class QueueEvaluator:
    """Evaluates the queue; keeps a memo of parsed scheduler messages, which repeat across pods and ticks."""

    def __init__(self, policy: QueuePolicy, *, memo_limit: int = 50_000) -> None:
        self.policy = policy
        self._memo: dict[str, SchedulingDiagnosis] = {}
        self._memo_limit = memo_limit
        # Per workload: what its status was worked out from (pod generation, team, quota refusal, recent
        # preemptions) and the status itself. Same inputs → same status but for the wait, which is now - since.
        # What the last evaluation derived, so that the next re-derives only what changed since.
        self._known: dict[WorkloadKey, WorkloadFacts] | None = None
        self._seen_state: ClusterState | None = None
        self._epoch = -1
        self._position = 0
        self._refusals: dict[WorkloadKey, QuotaRefusal] = {}
        self._thrash: Counter[WorkloadKey] = Counter()
        self._order: list[WorkloadFacts] = []  # the last evaluation's waiting workloads in queue order

    def diagnose(self, message: str) -> SchedulingDiagnosis:
        d = self._memo.get(message)
        if d is None:
            if len(self._memo) >= self._memo_limit:
                self._memo.clear()
            d = self._memo[message] = parse_scheduling_message(message)
        return d

    def evaluate(self, state: ClusterState, *, now: float, include_running: bool = False) -> QueueSnapshot:
        """Return the queue at `now`: waiting workloads (and running ones if asked), capacity, preemptions.

        Successive calls on the same state re-derive only the workloads that changed since the last call
        (the state's change log, quota refusals entering or leaving their window, thrash counts); the
        rest keep their facts and get their wait as of `now`.
        """
        policy = self.policy
        cap = capacity(state.nodes, state.gpus_used)
        refusals = {
            k: q
            for k, q in state.quota_refusals.items()
            if q.last is not None and now - policy.quota_window <= q.last <= now + 60
        }
        thrash = self._thrash_counts(state.preemptions.values(), now=now)
        if include_running:
            keys = set(state.by_workload) | set(refusals) | state.expecting
            facts = self._derive(state, keys, refusals, thrash, now)
            listed = sorted(facts.values(), key=_order_key)
        else:
            listed = self._waiting_facts(state, refusals, thrash, now)

        frags: list[Fragmentation] = []
        gated_total = 0
        fragmentable = (WorkloadState.PENDING, WorkloadState.PARTIAL)
        lo, hi = cap.largest_free, cap.free_total
        for f in listed:
            gated_total += f.pods_gated
            # fragmented: fits the free GPUs in total (<= hi) but no single node (> lo)
            if lo < f.gpus_per_pod <= hi and f.state in fragmentable:
                frags.append(Fragmentation(f.key, f.gpus_per_pod, hi, lo))
        statuses = _positioned(listed, now)
        horizon = now - policy.preemption_window
        preemptions = sorted(
            (p for p in state.preemptions.values() if p.at is None or p.at >= horizon),
            key=lambda p: (p.at or 0.0, p.victim_uid),
            reverse=True,
        )
        disruptions = sorted(
            (d for d in state.disruptions.values() if d.at is None or d.at >= horizon),
            key=lambda d: (d.at or 0.0, d.uid),
            reverse=True,
        )
        return QueueSnapshot(
            at=now,
            workloads=tuple(statuses),
            capacity=cap,
            fragmentation=tuple(sorted(frags, key=lambda f: f.key)),
            preemptions=tuple(preemptions),
            disruptions=tuple(disruptions),
            gated_pods=gated_total,
            recent_preemptions=RecentPreemptions(policy.thrash_window, thrash),
        )

    def _derive(
        self,
        state: ClusterState,
        keys: Iterable[WorkloadKey],
        refusals: Mapping[WorkloadKey, QuotaRefusal],
        thrash: Counter[WorkloadKey],
        now: float,
    ) -> dict[WorkloadKey, WorkloadFacts]:
        out: dict[WorkloadKey, WorkloadFacts] = {}
        pods, by_workload = state.pods, state.by_workload
        for key in keys:
            members = by_workload.get(key, ())
            f = self._facts(state, key, [pods[u] for u in members], refusals.get(key), now, thrash)
            if f is not None:
                out[key] = f
        return out

    def _waiting_facts(
        self,
        state: ClusterState,
        refusals: dict[WorkloadKey, QuotaRefusal],
        thrash: Counter[WorkloadKey],
        now: float,
    ) -> list[WorkloadFacts]:
        """Return the facts of every non-running workload in queue order, re-deriving only what changed."""
        end = state.changes_base + len(state.changes)
        known = self._known
        if known is None or self._seen_state is not state or self._epoch != state.epoch:
            keys: set[WorkloadKey] = set(state.waiting_workloads) | set(refusals) | state.expecting
            derived = self._derive(state, keys, refusals, thrash, now)
            known = {k: f for k, f in derived.items() if f.state is not WorkloadState.RUNNING}
            self._order = sorted(known.values(), key=_order_key)
        else:
            changed = set(state.changes[self._position - state.changes_base :])
            old_refusals, old_thrash = self._refusals, self._thrash
            for k in refusals.keys() | old_refusals.keys():
                if refusals.get(k) is not old_refusals.get(k):
                    changed.add(k)
            for k in thrash.keys() | old_thrash.keys():
                if thrash.get(k, 0) != old_thrash.get(k, 0):
                    changed.add(k)
            waiting, expecting = state.waiting_workloads, state.expecting
            changed = {k for k in changed if k in waiting or k in refusals or k in known or k in expecting}
            if changed:
                wanted = [k for k in changed if k in waiting or k in refusals or k in expecting]
                fresh = self._derive(state, wanted, refusals, thrash, now)
                added: list[WorkloadFacts] = []
                for k in changed:
                    f = fresh.get(k)
                    if f is None or f.state is WorkloadState.RUNNING:
                        known.pop(k, None)
                    else:
                        known[k] = f
                        added.append(f)
                # The kept part is still in order; sorting it with the sorted additions appended is a
                # merge of two runs (linear), not a full sort of the queue.
                order = [f for f in self._order if f.key not in changed]
                added.sort(key=_order_key)
                order.extend(added)
                order.sort(key=_order_key)
                self._order = order
        self._known, self._seen_state, self._epoch, self._position = known, state, state.epoch, end
        self._refusals, self._thrash = refusals, thrash
        return self._order

    def status_of(self, state: ClusterState, key: WorkloadKey, *, now: float) -> WorkloadStatus | None:
        """Return one workload's status at `now`, running or not, without evaluating the whole queue.

        A tick evaluates the waiting workloads only (running ones are most of a big cluster); this answers
        for any one of them on demand. Queue positions (`ahead`) are left at zero: they belong to a tick.
        """
        refusal = state.quota_refusals.get(key)
        if refusal is not None and not (
            refusal.last is not None and now - self.policy.quota_window <= refusal.last <= now + 60
        ):
            refusal = None
        members = state.by_workload.get(key, ())
        thrash = self._thrash_counts(state.preemptions.values(), now=now)
        facts = self._facts(
            state, key, [state.pods[u] for u in members if u in state.pods], refusal, now, thrash
        )
        return None if facts is None else WorkloadStatus(facts, facts.wait_at(now))

    def _thrash_counts(self, preemptions: Iterable[Preemption], *, now: float) -> Counter[WorkloadKey]:
        since = now - self.policy.thrash_window
        times: dict[WorkloadKey, list[float]] = {}
        for p in preemptions:
            if p.victim_workload is None or p.at is None or p.at < since or p.at > now:
                continue
            times.setdefault(p.victim_workload, []).append(p.at)
        # Pods of one gang preempted together count once: a preemption within GANG_PREEMPTION_GAP of the
        # first of its burst is the same event (a minute's bucket would split a gang evicted across :00;
        # measuring from the previous one would chain a workload evicted every 50 s into one event).
        c: Counter[WorkloadKey] = Counter()
        for key, ts in times.items():
            ts.sort()
            start = ts[0]
            n = 1
            for t in ts[1:]:
                if t - start > GANG_PREEMPTION_GAP:
                    n, start = n + 1, t
            c[key] = n
        return c

    def _facts(
        self,
        state: ClusterState,
        key: WorkloadKey,
        pods: list[Pod],
        refusal: QuotaRefusal | None,
        now: float,
        thrash: Counter[WorkloadKey],
    ) -> WorkloadFacts | None:
        policy = self.policy
        if refusal is not None and pods and max(p.created for p in pods) > (refusal.last or 0.0):
            # The controller created a pod after its last refusal: that refusal is history, not a block.
            refusal = None
        tracked = [p for p in pods if not p.terminal and policy.selector.matches(p)]
        job = state.controller(key) if key in state.expecting else None
        if not tracked and refusal is None and job is None:
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
            ctrl = state.controller(refusal.refused_by) if refusal is not None else job
            priority, pclass = refused_priority(ctrl, state.priority_classes)
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
                diag = self.diagnose(c.message)
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
            missing, gpus_per_pod = refused_gpus(state.controller(refusal.refused_by), refusal, tracked)
            gpus_requested += missing
        if state_ is WorkloadState.QUOTA_BLOCKED and refusal is not None:
            why = f"refused by ResourceQuota {refusal.quota}: {_quota_words(refusal)}"
        elif state_ is WorkloadState.GATED:
            why = "held by scheduling gates: not queued yet"
        elif diag is not None:
            why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
        elif queued:
            why = "waiting for the scheduler to try it"
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
                if gw.why:
                    why = gw.why
                elif gw.message and (diag is None or not diag.raw.strip()):
                    diag = self.diagnose(gw.message)
                    why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
        if job is not None and refusal is None and state_ in (WorkloadState.RUNNING, WorkloadState.PENDING):
            made = sum(p.gpus for p in pods if not p.terminal)
            jw = job_wait(job, live, made, state.quotas_in(key.namespace), state.gangs.volcano_group(key))
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
                    diag = self.diagnose(jw.message)
                    why = explain(diag, gpus=gpus_per_pod, verdict=verdict)
            elif jw is not None:
                expected = job.pods
        if state_ is WorkloadState.PARTIAL:
            why = f"gang partly placed: {len(bound)} pod(s) hold {sum(p.gpus for p in bound)} GPU(s), " + why

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
            order=(
                policy.tiers.rank(tier.name),
                -priority,
                since if since is not None else float("inf"),
                key,
            ),
        )


def _order_key(f: WorkloadFacts) -> tuple[int, int, float, WorkloadKey]:
    return f.order


def _positioned(order: list[WorkloadFacts], now: float) -> list[WorkloadStatus]:
    """Return the tick's views in queue order, each with its wait at `now` and who is ahead of it."""
    out: list[WorkloadStatus] = []
    append = out.append
    ahead = 0
    per_tier: dict[str, int] = {}
    queued = (WorkloadState.PENDING, WorkloadState.PARTIAL)
    running = WorkloadState.RUNNING
    for f in order:
        since, state = f.since, f.state
        wait = 0.0 if since is None or state is running else max(0.0, now - since)
        if state in queued:
            same = per_tier.get(f.tier, 0)
            append(WorkloadStatus(f, wait, ahead, ahead - same))
            ahead += 1
            per_tier[f.tier] = same + 1
        else:
            append(WorkloadStatus(f, wait))
    return out


def _quota_words(q: QuotaRefusal) -> str:
    parts = []
    for res, want in sorted(q.requested.items()):
        parts.append(f"{res} requested {want}, used {q.used.get(res, '?')} of {q.limited.get(res, '?')}")
    return "; ".join(parts) or q.message
