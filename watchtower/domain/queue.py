"""The queue: which workloads wait, for how long, why, and what they hold while they wait.

The evaluator lives here: which workloads to re-derive, their order and positions. One workload's facts
are worked out in queue_facts.py; the values built are in queue_values.py, re-exported so readers import
them from either.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from itertools import repeat
from operator import sub

from watchtower.domain.forms.quota.refusals import QuotaRefusal
from watchtower.domain.messages.scheduler import SchedulingDiagnosis, parse_scheduling_message
from watchtower.domain.queue_values import (
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

from .capacity import capacity
from .disruptions import Preemption
from .never import NodeInventory
from .queue_facts import is_gated, pod_less, workload_facts
from .queue_order import Plan, QueueOrder
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
        self._position = 0  # in the state's change log: read up to here
        self._refusals: dict[WorkloadKey, QuotaRefusal] = {}
        self._thrash: Counter[WorkloadKey] = Counter()
        self._warned: set[WorkloadKey] = set()  # workloads with a current operator warning
        # The waiting workloads in queue order, kept by difference: readers ask it what changed.
        self.order = QueueOrder()
        # The node inventory the known facts' never verdicts were read from: another that does not give
        # the same verdicts re-derives them all.
        self._inventory: NodeInventory | None = None
        # Input skipped while telling what can never start (an unreadable quota quantity, a Kueue message
        # without its numbers), once per workload and wording: `odd_news` hands each out once, to be
        # counted and logged where logging is.
        self._odd_told: dict[WorkloadKey, str] = {}
        self._odd_news: list[tuple[WorkloadKey, str, str, str]] = []

    def _odd(self, key: WorkloadKey, kind: str, what: str, reason: str) -> None:
        if self._odd_told.get(key) == what:
            return
        if len(self._odd_told) > 10_000:
            self._odd_told.clear()
        self._odd_told[key] = what
        self._odd_news.append((key, kind, what, reason))

    def odd_news(self) -> list[tuple[WorkloadKey, str, str, str]]:
        """Return what was left out since last asked: (workload, kind, what, reason: one of
        facts_draft.LEFT_OUT_REASONS), each once."""
        news, self._odd_news = self._odd_news, []
        return news

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
            for k, q in state.control.quota_refusals.items()
            if q.last is not None and now - policy.quota_window <= q.last <= now + 60
        }
        thrash = self._thrash_counts(state.ledger.preemptions.values(), now=now)
        if include_running:
            keys = set(state.by_workload) | set(refusals)
            for held in pod_less():
                keys.update(held.held(state))
            order = QueueOrder(self._derive(state, keys, refusals, thrash, now).values())
        else:
            order = self._waiting_order(state, refusals, thrash, now)
        fragmentation = order.fragmentation(cap.largest_free, cap.free_total)
        statuses = _positioned(order.plan(), now)
        horizon = now - policy.preemption_window
        preemptions = sorted(
            (p for p in state.ledger.preemptions.values() if p.at is None or p.at >= horizon),
            key=lambda p: (p.at or 0.0, p.victim_uid),
            reverse=True,
        )
        disruptions = sorted(
            (d for d in state.ledger.disruptions.values() if d.at is None or d.at >= horizon),
            key=lambda d: (d.at or 0.0, d.uid),
            reverse=True,
        )
        return QueueSnapshot(
            at=now,
            workloads=statuses,
            capacity=cap,
            fragmentation=fragmentation,
            preemptions=tuple(preemptions),
            disruptions=tuple(disruptions),
            gated_pods=order.gated,
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
                odd=self._odd,
            )
            if f is not None:
                out[key] = f
        return out

    def needs(self, state: ClusterState) -> int:
        """Return the position of `state`'s change log from which this still needs its entries."""
        fresh = self._seen_state is state and self._epoch == state.log.epoch
        return self._position if fresh else state.log.changes_end

    def _waiting_order(
        self,
        state: ClusterState,
        refusals: dict[WorkloadKey, QuotaRefusal],
        thrash: Counter[WorkloadKey],
        now: float,
    ) -> QueueOrder:
        """Return every non-running workload's facts in queue order, re-deriving only what changed."""
        end = state.log.changes_end
        # An operator's warning leaving its TTL changes the why with nothing touched: re-derive then.
        warned = {k for k, w in state.control.operator_warnings.items() if w.current(now)}
        known = self._known
        if (
            known is None
            or self._seen_state is not state
            or self._epoch != state.log.epoch
            or self._position < state.log.changes_base  # what it had not read was forgotten
        ):
            keys: set[WorkloadKey] = set(state.waiting_workloads) | set(refusals)
            for held in pod_less():
                keys |= held.waiting(state)
            derived = self._derive(state, keys, refusals, thrash, now)
            known = {k: f for k, f in derived.items() if f.state is not WorkloadState.RUNNING}
            self.order.reset(known.values())
        else:
            changed = set(state.log.changes[self._position - state.log.changes_base :])
            old_refusals, old_thrash = self._refusals, self._thrash
            for k in refusals.keys() | old_refusals.keys():
                if refusals.get(k) is not old_refusals.get(k):
                    changed.add(k)
            for k in thrash.keys() | old_thrash.keys():
                if thrash.get(k, 0) != old_thrash.get(k, 0):
                    changed.add(k)
            changed |= warned ^ self._warned
            inventory = state.inventory()
            if inventory is not self._inventory and (
                self._inventory is None or not inventory.agrees_with(self._inventory)
            ):
                # A node added, removed or changed so that what could never start may now, or the reverse.
                changed |= known.keys()
            waiting, holders = state.waiting_workloads, pod_less()

            def listed(k: WorkloadKey) -> bool:
                # The same keys a first evaluation lists (each form's `may_wait`, not every job it holds).
                return k in waiting or k in refusals or any(h.may_wait(state, k) for h in holders)

            changed = {k for k in changed if k in known or listed(k)}
            if changed:
                wanted = [k for k in changed if listed(k)]
                fresh = self._derive(state, wanted, refusals, thrash, now)
                removed: list[WorkloadFacts] = []
                added: list[WorkloadFacts] = []
                for k in changed:
                    old = known.get(k)
                    f = fresh.get(k)
                    if f is None or f.state is WorkloadState.RUNNING:
                        if old is not None:
                            del known[k]
                            removed.append(old)
                    elif f != old:  # re-derived alike (a touch that changed nothing it reads): kept
                        known[k] = f
                        added.append(f)
                        if old is not None:
                            removed.append(old)
                self.order.replace(removed, added)
        self._known, self._seen_state, self._epoch, self._position = known, state, state.log.epoch, end
        self._inventory = state.inventory()
        self._refusals, self._thrash, self._warned = refusals, thrash, warned
        return self.order

    def status_of(self, state: ClusterState, key: WorkloadKey, *, now: float) -> WorkloadStatus | None:
        """Return one workload's status at `now`, running or not, without evaluating the whole queue.

        A tick evaluates the waiting workloads only (running ones are most of a big cluster); this answers
        for any one of them on demand. Queue positions (`ahead`) are left at zero: they belong to a tick.
        """
        refusal = state.control.quota_refusals.get(key)
        if refusal is not None and not (
            refusal.last is not None and now - self.policy.quota_window <= refusal.last <= now + 60
        ):
            refusal = None
        members = state.by_workload.get(key, ())
        thrash = self._thrash_counts(state.ledger.preemptions.values(), now=now)
        pods = [state.pods[u] for u in members if u in state.pods]
        facts = workload_facts(
            state, key, pods, refusal, now, thrash, policy=self.policy, diagnose=self.diagnose, odd=self._odd
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


def _positioned(plan: Plan, now: float) -> tuple[WorkloadStatus, ...]:
    """Return the tick's views in queue order, each with its wait at `now` and who is ahead of it."""
    # wait = max(0, now - since), NO_WAIT's included: two maps and a constructor call per workload, in C
    waits = map(max, repeat(0.0), map(sub, repeat(now), plan.since))
    return tuple(map(WorkloadStatus, plan.facts, waits, plan.ahead, plan.ahead_higher_tier))
