"""What the evaluator's listed facts give the service's tick whatever the clock, kept by difference.

The gauges' pending counts (per tier, namespace and reason), partial gangs and each tier's earliest wait
start, the priority-inversion rule's candidates, the running workloads' keys and the stuck heads' index
follow from the listed facts alone. After churn the evaluator's order says which facts it took out and
put in (`QueueOrder.change_since`): these figures change by those only, never by a walk of every listed
workload (37,000 and more with Kueue and DRA), which a tick after churn used to pay six times over.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

from watchtower.domain.alerts.rules.priority_inversion import may_stick
from watchtower.domain.forms.gated.records import GatedFacts
from watchtower.domain.queue import (
    WAITING_STATES,
    QueueSnapshot,
    WorkloadFacts,
    WorkloadState,
    WorkloadStatus,
)
from watchtower.domain.queue_order import OrderKey
from watchtower.domain.stuck import StuckIndex, in_order
from watchtower.domain.workloads import WorkloadKey

PendingKey = tuple[str, str, str]  # tier, namespace, reason
_NEVER = float("inf")  # a candidate with no wait start waits 0 s: the shortest wait there is


class ListedFigures:
    """The figures of one generation of the evaluator's order; `apply` moves them to the next."""

    def __init__(
        self,
        facts: Iterable[WorkloadFacts],
        *,
        generation: int,
        tier_names: Sequence[str],
        inversion_tiers: frozenset[str],
        reason: Callable[[WorkloadFacts], str],
    ) -> None:
        self.generation = generation
        self.inversion_tiers = inversion_tiers
        self._reason = reason
        self.pending: Counter[PendingKey] = Counter()
        self.partial = dict.fromkeys(tier_names, 0)
        self.partial_gpus = dict.fromkeys(tier_names, 0)
        # Waiting workloads held by scheduling gates, per (tier, the gate's owner): watchtower_gated_workloads.
        self.gated: Counter[tuple[str, str]] = Counter()
        # Waiting workloads that can never start as configured, per (tier, why): watchtower_never_startable_workloads.
        self.never: Counter[tuple[str, str]] = Counter()
        self._waiting: Counter[str] = Counter()  # waiting workloads per tier
        self._starts: dict[str, list[float]] = {}  # per tier, the waiting ones' known wait starts, sorted
        # Per (team, tier): GPUs waiting work still needs, and the waiting ones' known wait starts, sorted
        # (the fairness gauges watchtower_waiting_gpus and watchtower_team_oldest_wait_seconds).
        self.team_waiting_gpus: Counter[tuple[str, str]] = Counter()
        self._team_waiting: Counter[tuple[str, str]] = Counter()
        self._team_starts: dict[tuple[str, str], list[float]] = {}
        # Per inversion tier, (wait start, order key) of the workloads the rule may find stuck, sorted: the
        # first waits longest, and is stuck if any of its tier is (one tier, one warning time).
        self._candidates: dict[str, list[tuple[float, OrderKey]]] = {}
        self.running: set[WorkloadKey] = set()  # keys of the workloads with a bound training pod
        self.stuck = StuckIndex()
        for f in facts:
            self._add(f)

    def apply(
        self, removed: Iterable[WorkloadFacts], added: Iterable[WorkloadFacts], generation: int
    ) -> None:
        for f in removed:
            self._drop(f)
        for f in added:
            self._add(f)
        self.generation = generation

    def _add(self, f: WorkloadFacts) -> None:
        self._count(f, 1)
        tier = f.tier
        if f.state in WAITING_STATES and f.since is not None:
            insort(self._starts.setdefault(tier, []), f.since)
            insort(self._team_starts.setdefault((f.team, tier), []), f.since)
        if may_stick(f, self.inversion_tiers):
            insort(self._candidates.setdefault(tier, []), (_start(f), f.order))
        if f.pods_running:
            self.running.add(f.key)
        self.stuck.add(f)

    def _drop(self, f: WorkloadFacts) -> None:
        self._count(f, -1)
        tier = f.tier
        if f.state in WAITING_STATES and f.since is not None:
            _remove(self._starts.get(tier, []), f.since)
            _remove(self._team_starts.get((f.team, tier), []), f.since)
        if may_stick(f, self.inversion_tiers):
            _remove(self._candidates.get(tier, []), (_start(f), f.order))
        if f.pods_running:
            self.running.discard(f.key)
        self.stuck.drop(f)

    def _count(self, f: WorkloadFacts, n: int) -> None:
        if f.state not in WAITING_STATES:
            return
        tier = f.tier
        self._waiting[tier] += n
        team_key = (f.team, tier)
        self._team_waiting[team_key] += n
        self.team_waiting_gpus[team_key] += n * max(0, f.gpus_requested - f.gpus_held)
        if not self._team_waiting[team_key]:
            del self._team_waiting[team_key], self.team_waiting_gpus[team_key]
        key = (tier, f.key.namespace, self._reason(f))
        left = self.pending[key] + n
        if left:
            self.pending[key] = left
        else:
            del self.pending[key]
        g = f.form_facts.get("gated") if f.scheduling_reason == "SchedulingGated" else None
        if isinstance(g, GatedFacts):
            gkey = (tier, g.owner)
            if self.gated[gkey] + n:
                self.gated[gkey] += n
            else:
                del self.gated[gkey]
        if f.never is not None:
            nkey = (tier, f.never.reason)
            if self.never[nkey] + n:
                self.never[nkey] += n
            else:
                del self.never[nkey]
        if f.state is WorkloadState.PARTIAL and f.key.gang:
            self.partial[tier] = self.partial.get(tier, 0) + n
            self.partial_gpus[tier] = self.partial_gpus.get(tier, 0) + n * f.gpus_held

    def earliest_starts(self) -> dict[str, float | None]:
        """Return each tier's earliest wait start among its waiting workloads (None: none has one)."""
        starts = self._starts
        return {t: (s[0] if (s := starts.get(t)) else None) for t, n in self._waiting.items() if n > 0}

    def team_waits(self) -> tuple[dict[tuple[str, str], int], dict[tuple[str, str], float]]:
        """Return, per (team, tier) with waiting work, the GPUs it still needs and its earliest known wait
        start."""
        starts = self._team_starts
        gpus = dict(self.team_waiting_gpus)
        return gpus, {k: s[0] for k in gpus if (s := starts.get(k))}

    def longest_waiting(self, snap: QueueSnapshot) -> list[WorkloadStatus]:
        """Return, per inversion tier, the status of the candidate that has waited longest: the rule's
        test (`holders_needed_below`) finds a tier stuck exactly when it finds that one stuck."""
        out = []
        for candidates in self._candidates.values():
            if candidates and (w := in_order(snap.workloads, candidates[0][1])) is not None:
                out.append(w)
        return out


def _start(f: WorkloadFacts) -> float:
    return _NEVER if f.since is None else f.since


def _remove(items: list[float] | list[tuple[float, OrderKey]], x: float | tuple[float, OrderKey]) -> None:
    i = bisect_left(items, x)
    if i < len(items) and items[i] == x:
        del items[i]
