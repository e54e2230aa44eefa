"""Heads of the queue that fit yet do not start: each tier's first queued workload, when some node has the
free GPUs, CPU and memory its pod asks for, but it has waited past `stuck_after`.

Capacity leaves the scheduler no reason of its own to hold such a pod, so what it last said (its
`PodScheduled` message) is the lead; when it said nothing, the likely causes are named: a `schedulerName`
no scheduler serves, a gang whose pods do not all exist, a scheduler that is down. Only the heads are
looked at (one per tier), so a tick pays a walk of the nodes a few times, never of the pods.
"""

from __future__ import annotations

import bisect
from bisect import insort
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from watchtower.domain.forms.gangs.wait import gang_incomplete
from watchtower.domain.forms.kueue.records import SOURCE_KUEUE
from watchtower.domain.forms.kueue.tables import KueueTables
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue_values import QueueSnapshot, TrainingSelector, WorkloadFacts, WorkloadStatus
from watchtower.domain.records import Node, Pod

from .node_use import DEFAULT_SCHEDULER
from .queue import is_gated
from .queue_order import QUEUED, OrderKey
from .state import ClusterState
from .timefmt import format_duration

# Taint effects that keep a pod without a matching toleration off a node (PreferNoSchedule only steers).
_BLOCKING_EFFECTS = (":NoSchedule", ":NoExecute")
# A condition message quoted in an alert is cut here: the scheduler's own events stop at 1024 bytes.
MESSAGE_LIMIT = 1024
SAID_NOTHING = "the scheduler has said nothing about it (no PodScheduled condition)"
_gpus = itemgetter(0)


@dataclass(frozen=True, slots=True)
class StuckHead:
    """A tier's head that fits on `node` by the capacity model yet has waited `status.wait_seconds`."""

    status: WorkloadStatus
    pod: str  # the pod looked at: the workload's oldest queued one
    node: str  # a node it fits on (an untainted one when there is any)
    taints: tuple[str, ...]  # that node's blocking taints: tolerations are not read, so it may not fit
    scheduler: str  # the pod's spec.schedulerName
    said: str  # the scheduler's last PodScheduled message, "" when it said nothing
    causes: tuple[str, ...]  # likely causes, when it said nothing
    # Kueue: not admitted though its ClusterQueue (or cohort) has this many GPUs of quota free.
    cluster_queue: str = ""
    quota_free: int = 0

    @property
    def why(self) -> str:
        """Return one sentence: where it fits, and what the scheduler said or what may be wrong."""
        if self.cluster_queue:
            where = (
                f"its ClusterQueue {self.cluster_queue} (with its cohort) has {self.quota_free} GPU(s) of "
                f"nominal quota free for its {self.status.gpus_requested}, yet Kueue has not admitted it"
            )
            said = f"; Kueue says: {self.said}" if self.said else ""
            return f"{where}{said}; likely: " + "; ".join(self.causes)
        where = f"fits on node {self.node} by free GPUs, CPU and memory"
        if self.taints:
            where += (
                f", which has taint(s) {', '.join(self.taints)} (Watchtower does not read tolerations: "
                "if the pod does not tolerate them, that is why)"
            )
        if self.said:
            return f"{where}, yet the scheduler says: {self.said}"
        return f"{where}, yet {SAID_NOTHING}; likely: " + "; ".join(self.causes)


class _Free:
    """What each node has free for one head: allocatable minus its bound pods' requests, minus what the
    pods nominated to it at the head's priority or above are promised there (kube-scheduler counts those
    as placed when it filters a lower pod), minus what the head's own gang took in this trial."""

    def __init__(self, st: ClusterState, priority: int, own: Set[str]) -> None:
        self.st = st
        self.promised = st.node_use.promised
        self.priority = priority
        self.own = own
        self.taken: dict[str, list[int]] = {}

    def _taken(self, name: str) -> list[int]:
        t = self.taken.get(name)
        if t is None:
            t = self.taken[name] = [0, 0, 0, 0]
            for p in self.promised.get(name, {}).values():
                if p.priority >= self.priority and p.uid not in self.own:
                    t[0] += p.gpus
                    t[1] += p.cpu_millis
                    t[2] += p.memory_bytes
                    t[3] += 1
        return t

    def fits(self, pod: Pod, node: Node) -> bool:
        if node.unschedulable:
            return False
        name, use = node.name, self.st.node_use
        g, c, m, n = self._taken(name)
        if pod.gpus > self.st.node_gpus(node) - self.st.gpus_used.get(name, 0) - g:
            return False
        if pod.cpu_millis > node.cpu_millis - use.cpu_millis.get(name, 0) - c:
            return False
        if pod.memory_bytes > node.memory_bytes - use.memory_bytes.get(name, 0) - m:
            return False
        # A node that reports no pod capacity is not limited by it here.
        return node.pods <= 0 or use.pods.get(name, 0) + n < node.pods

    def take(self, pod: Pod, node: str) -> None:
        t = self._taken(node)
        t[0] += pod.gpus
        t[1] += pod.cpu_millis
        t[2] += pod.memory_bytes
        t[3] += 1


def _blocking(node: Node) -> tuple[str, ...]:
    return tuple(t for t in node.taints if t.endswith(_BLOCKING_EFFECTS))


def _place(pod: Pod, nodes: Iterable[Node], free: _Free) -> tuple[str, tuple[str, ...]] | None:
    """Return a node the pod fits on and its blocking taints, an untainted one first; None if none fits."""
    tainted: tuple[str, tuple[str, ...]] | None = None
    for node in nodes:
        if not free.fits(pod, node):
            continue
        taints = _blocking(node)
        if not taints:
            return node.name, ()
        if tainted is None:
            tainted = (node.name, taints)
    return tainted


def _causes(
    pod: Pod, w: WorkloadStatus, st: ClusterState, last_bound: Mapping[str, float], now: float
) -> tuple[str, ...]:
    out: list[str] = []
    sched = pod.scheduler or DEFAULT_SCHEDULER
    if pod.scheduler and not st.node_use.serves(pod.scheduler):
        out.append(
            f'its schedulerName "{pod.scheduler}" is named by no bound pod: no scheduler of that name '
            "seems to serve this cluster"
        )
    # The queue read the gang's minimum already: its PodGroup's minCount, Volcano's minMember, or the
    # pods a PaddleJob's spec asks for.
    if w.pods_expected and w.pods_existing < w.pods_expected:
        out.append(gang_incomplete(w.pods_existing, w.pods_expected, w.source))
    last = last_bound.get(pod.scheduler)
    if last is None:
        out.append(f"{sched} has bound no pod since Watchtower started watching: is it running?")
    else:
        ago = format_duration(max(0.0, now - last), spoken=True)
        out.append(f"{sched} last bound a pod {ago} ago: if that is long, is it running?")
    return tuple(out)


class StuckIndex:
    """Where a snapshot's candidates are, from its listed facts alone, kept by difference (`add`, `drop`):
    each tier's queued workloads and the Kueue-held ones, by their place in the queue order. The statuses
    themselves are found in the snapshot by that place, whose order it is."""

    def __init__(self) -> None:
        self._queued: dict[str, list[OrderKey]] = {}  # per tier, its queued workloads' order keys, sorted
        self.kueue: list[tuple[int, OrderKey]] = []  # (GPUs asked, order key) of each Kueue-held one, sorted

    def add(self, f: WorkloadFacts) -> None:
        if f.state in QUEUED:
            insort(self._queued.setdefault(f.tier, []), f.order)
        if f.source == SOURCE_KUEUE:
            insort(self.kueue, (f.gpus_requested, f.order))

    def drop(self, f: WorkloadFacts) -> None:
        if f.state in QUEUED:
            _remove(self._queued.get(f.tier, []), f.order)
        if f.source == SOURCE_KUEUE:
            _remove(self.kueue, (f.gpus_requested, f.order))

    def heads(self) -> list[OrderKey]:
        """Return each tier's first queued workload's order key, in queue order (tier by tier)."""
        return sorted(keys[0] for keys in self._queued.values() if keys)


def _remove(items: list[Any], x: Any) -> None:  # sorted order keys, or (GPUs, order key) pairs
    i = bisect.bisect_left(items, x)
    if i < len(items) and items[i] == x:
        del items[i]


def stuck_index(listed: Iterable[WorkloadFacts]) -> StuckIndex:
    """Return the tier heads and the Kueue-held workloads of some facts."""
    index = StuckIndex()
    for f in listed:
        index.add(f)
    return index


def in_order(listed: Sequence[WorkloadStatus], key: OrderKey) -> WorkloadStatus | None:
    """Return the status of a snapshot's workloads (in queue order) whose facts have this order key."""
    i = bisect.bisect_left(listed, key, key=_order_of)
    if i < len(listed) and listed[i].facts.order == key:
        return listed[i]
    return None


def _order_of(w: WorkloadStatus) -> OrderKey:
    return w.facts.order


def stuck_heads(
    snap: QueueSnapshot,
    st: ClusterState,
    *,
    stuck_after: float,
    selector: TrainingSelector,
    last_bound: Mapping[str, float],
    index: StuckIndex | None = None,
) -> tuple[StuckHead, ...]:
    """Return each tier's head that fits somewhere yet has waited `stuck_after` or longer, in tier order.

    `index`: `stuck_index` of the snapshot's facts, when the caller kept it (it follows from them alone)."""
    now = snap.at
    if index is None:
        index = stuck_index(w.facts for w in snap.workloads)
    listed = snap.workloads
    heads = [w for key in index.heads() if (w := in_order(listed, key)) is not None]
    quota_free = _kueue_free(st.kueue)
    most = max((have for have in quota_free.values() if have is not None), default=None)
    # Kueue-held ones that some queue's free quota could take, in queue order
    wanted = [] if most is None else index.kueue[: bisect.bisect_right(index.kueue, most, key=_gpus)]
    found = (in_order(listed, key) for key in sorted(key for _, key in wanted))
    held = [w for w in found if w is not None]
    out: list[StuckHead] = _kueue_stuck(held, quota_free, stuck_after)
    nodes: list[Node] | None = None
    for w in heads:
        # Preemption under way: it waits for its victims to go, as it should (and is nominated there).
        if w.wait_seconds < stuck_after or w.preemption is PreemptionVerdict.POSSIBLE:
            continue
        pods = [st.pods[u] for u in st.by_workload.get(w.key, ()) if u in st.pods]
        # The pod its status was read from (the oldest queued one), as the why and the position were.
        waiting = [p for p in pods if p.waiting and selector.matches(p) and not is_gated(p)]
        if not waiting:
            continue
        if nodes is None:  # a walk of the nodes, once a tick, when a head is this old
            used, dra = st.gpus_used, st.dra.node_gpus()
            nodes = [
                n
                for n in st.nodes.values()
                if not n.unschedulable and n.gpus + dra.get(n.name, 0) > used.get(n.name, 0)
            ]
        free = _Free(st, w.priority, st.by_workload.get(w.key, set()))
        waiting.sort(key=lambda p: (p.created, p.name))
        pod = waiting[0]
        # Only nodes with a free GPU are tried (the training selector asks for GPUs; a full cluster has few).
        tried = nodes if min(p.gpus for p in waiting) > 0 else list(st.nodes.values())
        # A gang fits only as a whole: each of its queued pods must find room beside the others.
        placed = None
        for i, p in enumerate(waiting if w.gang else waiting[:1]):
            where = _place(p, tried, free)
            if where is None:
                placed = None
                break
            free.take(p, where[0])
            if i == 0:
                placed = where
        if placed is None:
            continue
        c = pod.scheduled
        said = c.message[:MESSAGE_LIMIT] if c is not None and c.status == "False" and c.message else ""
        causes = () if said else _causes(pod, w, st, last_bound, now)
        out.append(
            StuckHead(w, pod.name, placed[0], placed[1], pod.scheduler or DEFAULT_SCHEDULER, said, causes)
        )
    return tuple(out)


# What holds a Workload back when its quota is free (Kueue's scheduler, pkg/scheduler/scheduler.go: the
# namespace selector, admission checks, a stopped queue; StrictFIFO heads block those behind them).
KUEUE_CAUSES = (
    "a StrictFIFO ClusterQueue whose head cannot be admitted blocks the rest",
    "an admission check (ProvisioningRequest, MultiKueue) has not passed",
    "its namespace does not match the ClusterQueue's namespaceSelector",
    "the Kueue controller is down or not reconciling",
)


def _free_for(tables: KueueTables, cq: str, cohort_free: Mapping[str, int]) -> int | None:
    """Return GPUs of nominal quota a Workload of this ClusterQueue could take: its own free quota, plus
    what its cohort's other queues leave unused up to its borrowing limit; None: the queue is unknown.

    `cohort_free`: each cohort's free nominal quota over its queues that are not stopped."""
    q = tables.cluster_queues.get(cq)
    if q is None or q.free_nominal is None or q.stopped:
        return None
    free = q.free_nominal
    if q.cohort:
        lent = cohort_free.get(q.cohort, 0) - free  # the others' part: this queue is counted there too
        if q.borrowing_limit_gpus is not None:
            lent = min(lent, q.borrowing_limit_gpus)
        free += lent
    return free


def _kueue_free(tables: KueueTables) -> dict[str, int | None]:
    """Return each known ClusterQueue's GPUs a Workload of it could take (`_free_for`): a few dozen, with
    each cohort summed once (not once per queue of it: 50 queues made that 2,500 sums a tick)."""
    cohort_free: dict[str, int] = {}
    for o in tables.cluster_queues.values():
        if o.cohort and not o.stopped:
            cohort_free[o.cohort] = cohort_free.get(o.cohort, 0) + (o.free_nominal or 0)
    return {cq: _free_for(tables, cq, cohort_free) for cq in tables.cluster_queues}


def _kueue_stuck(
    held: Iterable[WorkloadStatus], free: Mapping[str, int | None], stuck_after: float
) -> list[StuckHead]:
    """Return the Kueue-held workloads not admitted past `stuck_after` while their queue has quota for them
    (`free`, by ClusterQueue: `_kueue_free`); an unknown queue has none."""
    out: list[StuckHead] = []
    for w in held:
        f = w.facts
        k = f.kueue
        if k is None or f.source != SOURCE_KUEUE or w.wait_seconds < stuck_after or not k.cluster_queue:
            continue
        have = free.get(k.cluster_queue)
        if have is None or have < f.gpus_requested:
            continue
        said = k.message[:MESSAGE_LIMIT]
        out.append(StuckHead(w, "", "", (), "kueue", said, KUEUE_CAUSES, k.cluster_queue, have))
    return out
