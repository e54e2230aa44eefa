"""The queue: which workloads wait, for how long, why, and what they hold while they wait.

The evaluator lives here: which workloads to re-derive, their order and positions. One workload's facts
are worked out in queue_facts.py; the values built are in queue_model.py, re-exported so readers import
them from either.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import NamedTuple

from .capacity import capacity
from .disruptions import Preemption
from .messages import SchedulingDiagnosis, parse_scheduling_message
from .queue_facts import is_gated, workload_facts
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
from .quota import QuotaRefusal
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
        self._warned: set[WorkloadKey] = set()  # workloads with a current operator warning
        self._order: list[WorkloadFacts] = []  # the last evaluation's waiting workloads in queue order
        # That order's fragmentation and gated pods at its free GPUs (largest, total), and its plan.
        self._laid: (
            tuple[list[WorkloadFacts], tuple[int, int], tuple[Fragmentation, ...], int, _Plan] | None
        ) = None

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
        cap = capacity(state.nodes, state.gpus_used, state.dra.node_gpus())
        refusals = {
            k: q
            for k, q in state.quota_refusals.items()
            if q.last is not None and now - policy.quota_window <= q.last <= now + 60
        }
        thrash = self._thrash_counts(state.preemptions.values(), now=now)
        if include_running:
            keys = set(state.by_workload) | set(refusals) | state.expecting | state.kueue.held
            facts = self._derive(state, keys, refusals, thrash, now)
            listed = sorted(facts.values(), key=_order_key)
        else:
            listed = self._waiting_facts(state, refusals, thrash, now)

        lo, hi = cap.largest_free, cap.free_total
        # The evaluator keeps its order list while nothing changed: what follows from it and the free GPUs
        # alone is kept with it, and a tick then only puts the clock on 20,000 and more waits.
        laid = self._laid
        if laid is None or laid[0] is not listed or laid[1] != (lo, hi) or len(laid[4].facts) != len(listed):
            frags: list[Fragmentation] = []
            gated_total = 0
            fragmentable = (WorkloadState.PENDING, WorkloadState.PARTIAL)
            for f in listed:
                gated_total += f.pods_gated
                # fragmented: fits the free GPUs in total (<= hi) but no single node (> lo)
                if lo < f.gpus_per_pod <= hi and f.state in fragmentable:
                    frags.append(Fragmentation(f.key, f.gpus_per_pod, hi, lo))
            laid = (listed, (lo, hi), tuple(sorted(frags, key=lambda f: f.key)), gated_total, _plan(listed))
            if not include_running:  # a list of its own each call: never the same object again
                self._laid = laid
        fragmentation, gated_total, plan = laid[2], laid[3], laid[4]
        statuses = _positioned(listed, now, plan)
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
            fragmentation=fragmentation,
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
            f = workload_facts(
                state,
                key,
                [pods[u] for u in members],
                refusals.get(key),
                now,
                thrash,
                policy=self.policy,
                diagnose=self.diagnose,
            )
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
        # An operator's warning leaving its TTL changes the why with nothing touched: re-derive then.
        warned = {k for k, w in state.operator_warnings.items() if w.current(now)}
        known = self._known
        if known is None or self._seen_state is not state or self._epoch != state.epoch:
            keys: set[WorkloadKey] = set(state.waiting_workloads) | set(refusals) | state.expecting
            keys |= state.kueue_waiting()
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
            changed |= warned ^ self._warned
            waiting, expecting, kueue = state.waiting_workloads, state.expecting, state.kueue_may_wait
            changed = {
                k
                for k in changed
                if k in waiting or k in refusals or k in known or k in expecting or kueue(k)
            }
            if changed:
                # The same keys a first evaluation lists (`state.kueue_waiting`, not every held job: an
                # admitted one whose pods are all there is listed by its waiting pods, or not at all).
                wanted = [k for k in changed if k in waiting or k in refusals or k in expecting or kueue(k)]
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
        self._refusals, self._thrash, self._warned = refusals, thrash, warned
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
        pods = [state.pods[u] for u in members if u in state.pods]
        facts = workload_facts(
            state, key, pods, refusal, now, thrash, policy=self.policy, diagnose=self.diagnose
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


def _order_key(f: WorkloadFacts) -> tuple[int, int, float, WorkloadKey]:
    return f.order


class _Plan(NamedTuple):
    """What a queue order alone gives each tick's views: kept while the evaluator's order stays the same."""

    facts: list[WorkloadFacts]
    since: list[float | None]  # None: no wait (unknown start, or running)
    ahead: list[int]
    ahead_higher_tier: list[int]


def _plan(order: list[WorkloadFacts]) -> _Plan:
    """Return the order's wait starts and who is ahead of each, the clock left out."""
    sinces: list[float | None] = []
    aheads: list[int] = []
    higher: list[int] = []
    ahead = 0
    # The order is by tier first, so a tier's queued workloads come in one run: its count is kept in a
    # local while the run lasts and in the dict only between runs (a dict update per workload was most
    # of this loop at 24,000 waiting workloads).
    per_tier: dict[str, int] = {}
    tier: str | None = None
    same = 0
    pending, partial, running = WorkloadState.PENDING, WorkloadState.PARTIAL, WorkloadState.RUNNING
    for f in order:
        since, state = f.since, f.state
        sinces.append(None if state is running else since)
        if state is pending or state is partial:
            t = f.tier
            if t != tier:
                if tier is not None:
                    per_tier[tier] = same
                tier, same = t, per_tier.get(t, 0)
            aheads.append(ahead)
            higher.append(ahead - same)
            ahead += 1
            same += 1
        else:
            aheads.append(0)
            higher.append(0)
    return _Plan(list(order), sinces, aheads, higher)


def _positioned(order: list[WorkloadFacts], now: float, plan: _Plan | None = None) -> list[WorkloadStatus]:
    """Return the tick's views in queue order, each with its wait at `now` and who is ahead of it
    (`plan`: the order's `_plan`, when the caller kept it)."""
    if plan is None:
        plan = _plan(order)
    status = WorkloadStatus
    return [
        status(f, 0.0 if since is None or now - since < 0.0 else now - since, ahead, higher)
        for f, since, ahead, higher in zip(
            plan.facts, plan.since, plan.ahead, plan.ahead_higher_tier, strict=True
        )
    ]
