"""The simulator's scheduler: kube-scheduler's default-profile decisions on an in-memory cluster.

It imitates what Watchtower has to read correctly (DESIGN §3): queue order, fit, the node choice, preemption with
victim selection and add-back, nominated-node reservations, and the exact FailedScheduling message grammar of
`FitError.Error()` (pkg/scheduler/framework/types.go). It decides; the cluster applies the decisions.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Protocol, TypeVar

NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
POLICY_NEVER = "not eligible due to preemptionPolicy=Never."
TERMINATING_ON_NOMINATED = "not eligible due to a terminating pod on the nominated node."
CORDONED = "node(s) were unschedulable"
# The DynamicResources plugin (v1.36.3 dynamicresources.go): its Filter on a node whose free devices do not
# satisfy the claims (UnschedulableAndUnresolvable: preemption never helps), and its PostFilter's words when
# no claim of the pod can be deallocated; it runs before DefaultPreemption.
CANNOT_ALLOCATE = "cannot allocate all claims"
DRA_POST_FILTER = "still not schedulable"
# Priorities are shifted to be non-negative before summing, as the scheduler does, so that many pods of
# negative priority never look cheaper than a few.
_SHIFT = 2**31


class SchedPod(Protocol):
    """What the scheduler reads of a pod."""

    @property
    def uid(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def priority(self) -> int: ...
    @property
    def preemption_policy(self) -> str: ...
    @property
    def created(self) -> float: ...
    @property
    def gpus(self) -> int: ...
    @property
    def dra_gpus(self) -> int: ...
    @property
    def cpu_millis(self) -> int: ...
    @property
    def memory_bytes(self) -> int: ...
    @property
    def node(self) -> str: ...
    @property
    def nominated(self) -> str: ...
    @property
    def terminating(self) -> bool: ...
    @property
    def start_time(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class SchedNode:
    name: str
    gpus: int
    cpu_millis: int
    memory_bytes: int
    pods: int
    unschedulable: bool = False
    dra_gpus: int = 0  # GPUs its ResourceSlices publish


@dataclass(slots=True)
class Usage:
    gpus: int = 0
    cpu_millis: int = 0
    memory_bytes: int = 0
    pods: int = 0
    dra_gpus: int = 0

    def add(self, p: SchedPod, sign: int = 1) -> None:
        self.gpus += sign * p.gpus
        self.dra_gpus += sign * p.dra_gpus
        self.cpu_millis += sign * p.cpu_millis
        self.memory_bytes += sign * p.memory_bytes
        self.pods += sign


@dataclass(frozen=True, slots=True)
class Bind:
    node: str


@dataclass(frozen=True, slots=True)
class Preempt:
    """Evict `victims` from `node` and nominate it; `message` is the FailedScheduling text of this attempt."""

    node: str
    victims: tuple[SchedPod, ...]
    message: str


@dataclass(frozen=True, slots=True)
class Unschedulable:
    message: str


Decision = Bind | Preempt | Unschedulable


P = TypeVar("P", bound=SchedPod)


def queue_order(pods: Iterable[P]) -> list[P]:
    """Return pods in the scheduler's activeQ order: higher priority first, then earlier creation."""
    return sorted(pods, key=lambda p: (-p.priority, p.created, p.name, p.uid))


def _reasons(node: SchedNode, free: Usage, pod: SchedPod) -> tuple[list[str], bool]:
    """Return (filter reasons, unresolvable) for a pod on a node with `free` left; no reasons means it fits."""
    if node.unschedulable:
        return [CORDONED], True
    out: list[str] = []
    unresolvable = False
    if free.pods < 1:
        out.append("Too many pods")
        unresolvable |= node.pods < 1
    if pod.cpu_millis > 0 and pod.cpu_millis > free.cpu_millis:
        out.append("Insufficient cpu")
        unresolvable |= pod.cpu_millis > node.cpu_millis
    if pod.memory_bytes > 0 and pod.memory_bytes > free.memory_bytes:
        out.append("Insufficient memory")
        unresolvable |= pod.memory_bytes > node.memory_bytes
    if pod.gpus > 0 and pod.gpus > free.gpus:
        out.append("Insufficient nvidia.com/gpu")
        unresolvable |= pod.gpus > node.gpus
    if not out and pod.dra_gpus > free.dra_gpus:  # a later plugin: only where the fit passed
        return [CANNOT_ALLOCATE], True
    return out, unresolvable


def _histogram(n_nodes: int, per_node: Mapping[str, Sequence[str]]) -> str:
    # A plain dict, not Counter.update: this runs for every refused attempt, ~80 000 times a simulated week.
    counts: dict[str, int] = {}
    for reasons in per_node.values():
        for r in reasons:
            counts[r] = counts.get(r, 0) + 1
    # The scheduler sorts the "<n> <reason>" strings themselves, counts included.
    return ", ".join(sorted(f"{n} {r}" for r, n in counts.items()))


def fit_error(n_nodes: int, per_node: Mapping[str, Sequence[str]], post_filter: str = "") -> str:
    """Return FitError.Error(): `0/N nodes are available: <histogram>.` plus ` <post-filter message>`."""
    msg = f"0/{n_nodes} nodes are available:"
    hist = _histogram(n_nodes, per_node)
    if hist:
        msg += f" {hist}."
    if post_filter:
        msg += f" {post_filter}"
    return msg


@dataclass
class Scheduler:
    """One scheduling cycle per pod, against the cluster as it stands."""

    nodes: Sequence[SchedNode]
    rng: random.Random
    _usage: dict[str, Usage] = field(default_factory=dict)
    _bound: dict[str, list[SchedPod]] = field(default_factory=dict)
    _nominated: dict[str, list[SchedPod]] = field(default_factory=dict)
    _names: dict[str, SchedNode] = field(default_factory=dict)  # the nodes by name, made once
    _names_of: Sequence[SchedNode] | None = None
    # Refusals kept while the ledger stands (`_version` counts its changes): pods alike in what the
    # decision reads are refused in the same words, and a busy queue asks for the same pod shape many
    # times a cycle (three attempts in four, in a simulated week).
    _version: int = 0
    _refused: dict[tuple[object, ...], tuple[int, Unschedulable]] = field(default_factory=dict)
    _nominated_uids: tuple[int, frozenset[str]] = (-1, frozenset())

    def load(self, pods: Iterable[SchedPod]) -> None:
        """Take the pods holding resources (bound and not finished, terminating ones too) and the nominated ones."""
        self._usage = {n.name: Usage() for n in self.nodes}
        self._bound = {n.name: [] for n in self.nodes}
        self._nominated = {n.name: [] for n in self.nodes}
        self._version += 1
        for p in pods:
            if p.node:
                if p.node in self._usage:
                    self._usage[p.node].add(p)
                    self._bound[p.node].append(p)
            elif p.nominated in self._nominated and not p.terminating:
                self._nominated[p.nominated].append(p)

    def save(self) -> tuple[dict[str, Usage], dict[str, list[SchedPod]], dict[str, list[SchedPod]]]:
        """Return a copy of the ledger, for `restore` after a trial that must leave no trace (a gang)."""
        return (
            {k: replace(u) for k, u in self._usage.items()},
            {k: list(v) for k, v in self._bound.items()},
            {k: list(v) for k, v in self._nominated.items()},
        )

    def restore(
        self, saved: tuple[dict[str, Usage], dict[str, list[SchedPod]], dict[str, list[SchedPod]]]
    ) -> None:
        self._usage, self._bound, self._nominated = saved
        self._version += 1

    def _by_name(self) -> dict[str, SchedNode]:
        if self._names_of is not self.nodes:
            self._names, self._names_of = {n.name: n for n in self.nodes}, self.nodes
        return self._names

    def bound_to(self, node: str) -> list[SchedPod]:
        return list(self._bound.get(node, ()))

    def _free(self, node: SchedNode, pod: SchedPod, *, without: Iterable[SchedPod] = ()) -> Usage:
        """Allocatable minus what is used and what higher-or-equal nominated pods have reserved."""
        used = self._usage[node.name]
        free = Usage(
            node.gpus - used.gpus,
            node.cpu_millis - used.cpu_millis,
            node.memory_bytes - used.memory_bytes,
            node.pods - used.pods,
            node.dra_gpus - used.dra_gpus,
        )
        nominated = self._nominated[node.name]
        if nominated:  # rarely: most nodes reserve nothing (this runs for every node at every attempt)
            for q in nominated:
                if q.uid != pod.uid and q.priority >= pod.priority:
                    free.add(q, -1)
        if without:
            for v in without:
                free.add(v)
        return free

    def _assume(self, pod: SchedPod, node: str) -> None:
        self._version += 1
        self._usage[node].add(pod)
        self._bound[node].append(pod)
        for lst in self._nominated.values():
            if pod in lst:
                lst.remove(pod)

    def _nominate(self, pod: SchedPod, node: str) -> None:
        self._version += 1
        for lst in self._nominated.values():
            if pod in lst:
                lst.remove(pod)
        self._nominated[node].append(pod)

    def place(self, pod: SchedPod) -> str:
        """Return the node a pod fits on now, assumed on the ledger; "" when none (no preemption is tried)."""
        feasible = [n for n in self.nodes if not _reasons(n, self._free(n, pod), pod)[0]]
        if not feasible:
            return ""
        chosen = self._pick(feasible, pod)
        self._assume(pod, chosen.name)
        return chosen.name

    def idle_gpus(self) -> int:
        """Return the GPUs no bound pod holds on nodes that take new pods."""
        return sum(max(0, n.gpus - self._usage[n.name].gpus) for n in self.nodes if not n.unschedulable)

    def schedule(self, pod: SchedPod) -> Decision:
        """Return what the scheduler does with one pending pod now; a Bind is applied to the ledger at once."""
        key = self._alike(pod)
        if key is not None:
            kept = self._refused.get(key)
            if kept is not None and kept[0] == self._version:
                return kept[1]
        d = self._decide(pod)
        if key is not None and isinstance(d, Unschedulable):
            self._refused[key] = (self._version, d)
        return d

    def _alike(self, pod: SchedPod) -> tuple[object, ...] | None:
        """Return what a decision reads of `pod` while the ledger stands, or None when it reads more: a
        pod with a nomination tries its node first, and one the ledger holds as nominated is left out of
        the reservations it is compared with."""
        if pod.nominated in self._by_name():
            return None
        version, uids = self._nominated_uids
        if version != self._version:
            uids = frozenset(q.uid for lst in self._nominated.values() for q in lst)
            self._nominated_uids = (self._version, uids)
        if pod.uid in uids:
            return None
        return (pod.priority, pod.preemption_policy, pod.gpus, pod.dra_gpus, pod.cpu_millis, pod.memory_bytes)

    def _decide(self, pod: SchedPod) -> Decision:
        per_node: dict[str, list[str]] = {}
        unresolvable: set[str] = set()
        feasible: list[SchedNode] = []
        by_name = self._by_name()
        # A pod with a nominated node tries that node first, as the scheduler does.
        if pod.nominated in by_name:
            n = by_name[pod.nominated]
            if not _reasons(n, self._free(n, pod), pod)[0]:
                self._assume(pod, n.name)
                return Bind(n.name)
        for n in self.nodes:
            reasons, unres = _reasons(n, self._free(n, pod), pod)
            if reasons:
                per_node[n.name] = reasons
                if unres:
                    unresolvable.add(n.name)
            else:
                feasible.append(n)
        if feasible:
            chosen = self._pick(feasible, pod)
            self._assume(pod, chosen.name)
            return Bind(chosen.name)
        n_nodes = len(self.nodes)
        dra = f"{DRA_POST_FILTER}, " if pod.dra_gpus else ""
        if pod.preemption_policy == "Never":
            return Unschedulable(fit_error(n_nodes, per_node, f"{dra}preemption: {POLICY_NEVER}"))
        if pod.nominated in by_name and any(
            v.terminating and v.priority < pod.priority for v in self._bound[pod.nominated]
        ):
            return Unschedulable(fit_error(n_nodes, per_node, f"{dra}preemption: {TERMINATING_ON_NOMINATED}"))
        return self._preempt(pod, per_node, unresolvable, dra)

    def _pick(self, feasible: list[SchedNode], pod: SchedPod) -> SchedNode:
        """The default scoring spreads load (least allocated); ties are broken at random, as selectHost does."""

        def score(n: SchedNode) -> float:
            u = self._usage[n.name]
            parts = [
                (n.cpu_millis - u.cpu_millis - pod.cpu_millis) / n.cpu_millis if n.cpu_millis else 0.0,
                (n.memory_bytes - u.memory_bytes - pod.memory_bytes) / n.memory_bytes
                if n.memory_bytes
                else 0.0,
            ]
            if pod.gpus:
                parts.append((n.gpus - u.gpus - pod.gpus) / n.gpus if n.gpus else 0.0)
            if pod.dra_gpus:
                left = n.dra_gpus - u.dra_gpus - pod.dra_gpus
                parts.append(left / n.dra_gpus if n.dra_gpus else 0.0)
            return round(sum(parts) / len(parts), 6)

        best = max(score(n) for n in feasible)
        top = [n for n in feasible if score(n) == best]
        return top[0] if len(top) == 1 else self.rng.choice(top)

    def _preempt(
        self, pod: SchedPod, per_node: dict[str, list[str]], unresolvable: set[str], post_filter: str = ""
    ) -> Decision:
        n_nodes = len(self.nodes)
        post: dict[str, list[str]] = {}
        candidates: list[tuple[SchedNode, list[SchedPod]]] = []
        for n in self.nodes:
            if n.name in unresolvable or n.name not in per_node:
                post[n.name] = [NOT_HELPFUL]
                continue
            victims, status = self._victims_on(n, pod)
            if victims is None:
                post[n.name] = status
            else:
                candidates.append((n, victims))
        filter_part = fit_error(n_nodes, per_node)
        if not candidates:
            return Unschedulable(f"{filter_part} {post_filter}preemption: {fit_error(n_nodes, post)}")
        node, victims = min(candidates, key=lambda c: _candidate_rank(c[1]))
        self._nominate(pod, node.name)
        return Preempt(node.name, tuple(victims), filter_part)

    def _victims_on(self, node: SchedNode, pod: SchedPod) -> tuple[list[SchedPod] | None, list[str]]:
        """SelectVictimsOnNode: remove every lower-priority pod, then reprieve the most important first."""
        potential = [q for q in self._bound[node.name] if q.priority < pod.priority and not q.terminating]
        if not potential:
            return None, [NO_VICTIMS]
        reasons, _ = _reasons(node, self._free(node, pod, without=potential), pod)
        if reasons:
            return None, reasons
        potential.sort(key=_importance)
        removed = list(potential)
        victims: list[SchedPod] = []
        for q in potential:
            removed.remove(q)
            if _reasons(node, self._free(node, pod, without=removed), pod)[0]:
                removed.append(q)
                victims.append(q)
        return victims, []


def _importance(p: SchedPod) -> tuple[int, float]:
    """MoreImportantPod first: higher priority, then the one that started earlier."""
    return (-p.priority, p.start_time if p.start_time is not None else float("inf"))


def _candidate_rank(victims: list[SchedPod]) -> tuple[int, int, int, float]:
    """pickOneNodeForPreemption (no PDBs here): lowest highest-victim priority, smallest priority sum,
    fewest victims, then the latest start among the highest-priority victims."""
    top = max(v.priority for v in victims)
    starts = [v.start_time or 0.0 for v in victims if v.priority == top]
    return (top, sum(v.priority + _SHIFT for v in victims), len(victims), -min(starts))
