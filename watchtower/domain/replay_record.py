"""What a policy replay of a recorded week needs (issue 31, docs/replay.md): one row per GPU workload (its
arrival, tier and priority, team, pods and their GPUs, CPU and memory, gang minimum, the form it waited in,
when it started, was last preempted and ended) and one row per node (its GPUs, CPU and memory, when it was
first and last seen), derived from what the recorder sees at a tick, as a difference against what it wrote
before.

Pure: the previous state goes in, the next state and the rows to upsert come out. Every row is keyed by
facts the cluster keeps (the workload's namespace, kind and name and the second it arrived; the node's
name), and every time in it is one the store merges by rule (the earliest start and end, the latest
preemption and sighting), so two replicas or a restart write rows that merge to the same ones.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from .disruptions import Preemption
from .queue_values import WAITING_STATES, WorkloadFacts
from .records import Node, Pod
from .state import ClusterState
from .tick import Tick
from .tiers import TierPolicy
from .workloads import WorkloadKey

# The derivation runs once per this much cluster time: a start, an end or a preemption is read from the
# objects' own times where they carry one, so a coarser pass loses no figure, only delays its write.
RECORD_EVERY = 60.0
# A node's `last_seen` is written again this often while it stays; a node gone is last seen at most this
# long before it left.
NODE_REFRESH = 900.0

SKIP_NO_GPUS = "no GPUs asked"
SKIP_NO_TIER = "no tier"


@dataclass(frozen=True, slots=True)
class WorkloadRecord:
    """One workload as a replay needs it. `outcome`: waiting, running, finished or deleted (ended by its
    deletion before its pods completed, or before it ever started)."""

    key: str
    namespace: str
    kind: str
    name: str
    team: str
    tier: str
    priority: int
    form: str  # the queue form it waited in: pods, quota, kueue, podgroup, volcano-podgroup, paddlejob
    pods: int
    gpus_per_pod: int
    cpu_millis_per_pod: int | None
    memory_bytes_per_pod: int | None
    gang_min: int | None
    arrived: float
    started: float | None = None
    preempted: float | None = None  # the latest preemption of one of its pods
    ended: float | None = None
    outcome: str = "waiting"

    @property
    def workload(self) -> WorkloadKey:
        return WorkloadKey(self.namespace, self.kind, self.name)


@dataclass(frozen=True, slots=True)
class NodeRecord:
    name: str
    gpus: int
    cpu_millis: int
    memory_bytes: int
    first_seen: float
    last_seen: float


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the recorder reads at one tick: the waiting workloads' facts, the pods of each workload that
    has pods, the nodes and the preemptions the tick knows."""

    now: float
    facts: Sequence[WorkloadFacts]
    pods: Mapping[WorkloadKey, Sequence[Pod]]
    nodes: Iterable[tuple[Node, int]]  # each node with its GPUs (device plugin and DRA)
    preemptions: Sequence[Preemption] = ()


@dataclass(frozen=True, slots=True)
class ReplayState:
    open: Mapping[WorkloadKey, WorkloadRecord] = field(default_factory=dict)
    nodes: Mapping[str, NodeRecord] = field(default_factory=dict)
    skipped: frozenset[WorkloadKey] = frozenset()  # counted once each
    # Ended while their pods are still listed (a finished Job's completed pods): not looked at again.
    closed: frozenset[WorkloadKey] = frozenset()
    last_pass: float | None = None


@dataclass(frozen=True, slots=True)
class ReplayRows:
    workloads: tuple[WorkloadRecord, ...] = ()
    nodes: tuple[NodeRecord, ...] = ()
    skipped: Mapping[str, int] = field(default_factory=dict)  # reason -> workloads newly skipped

    @property
    def empty(self) -> bool:
        return not (self.workloads or self.nodes)


def view_of(tick: Tick, state: ClusterState) -> ClusterView:
    """Return what the recorder reads at `tick`: its waiting facts and preemptions, and the state's pods
    by workload and nodes (read on the event loop, between the state's updates)."""
    pods = state.pods
    return ClusterView(
        now=tick.at,
        facts=tick.listed_facts or tuple(w.facts for w in tick.snapshot.workloads),
        pods={k: [pods[u] for u in uids if u in pods] for k, uids in state.by_workload.items()},
        nodes=[(n, state.node_gpus(n)) for n in state.nodes.values()],
        preemptions=tick.snapshot.preemptions,
    )


def workload_key(key: WorkloadKey, arrived: float) -> str:
    return f"{key.namespace}/{key.kind}/{key.name}@{arrived:.0f}"


def state_from_store(open_rows: Iterable[WorkloadRecord], nodes: Iterable[NodeRecord]) -> ReplayState:
    """Return the state to start from after a restart: the workloads still open in the store (so one that
    ended while the service was down is closed, and one still there keeps its arrival and key)."""
    return ReplayState(
        open={r.workload: r for r in open_rows if r.ended is None}, nodes={n.name: n for n in nodes}
    )


def due(previous: ReplayState, now: float) -> bool:
    """Whether a pass is due at `now` (the first tick, then once per RECORD_EVERY of cluster time)."""
    return previous.last_pass is None or now - previous.last_pass >= RECORD_EVERY or now < previous.last_pass


def record_replay(
    view: ClusterView,
    previous: ReplayState,
    tiers: TierPolicy,
    team_of: Callable[[str], str],
) -> tuple[ReplayState, ReplayRows]:
    """Return the next state and the rows to upsert: each workload whose record changed (arrived, started,
    preempted, ended, its shape or tier), each node new, changed or due for its `last_seen` refresh.

    A workload without GPUs, or whose tier cannot be told, is skipped and counted once (`skipped`)."""
    now = view.now
    facts = {f.key: f for f in view.facts if f.state in WAITING_STATES}
    preempted: dict[WorkloadKey, float] = {}
    # A victim's start, as the preemption recorded it: a run shorter than a pass is seen only there.
    ran_from: dict[WorkloadKey, float] = {}
    for p in view.preemptions:
        k = p.victim_workload
        if k is not None and p.at is not None:
            preempted[k] = max(p.at, preempted.get(k, p.at))
            if p.victim_started is not None:
                ran_from[k] = min(p.victim_started, ran_from.get(k, p.victim_started))
    open_next: dict[WorkloadKey, WorkloadRecord] = {}
    out: list[WorkloadRecord] = []
    skipped_keys = set(previous.skipped)
    closed = set(previous.closed)
    skipped: dict[str, int] = {}
    for k in facts.keys() | view.pods.keys():
        if k in previous.closed:
            continue
        old = previous.open.get(k)
        rec, reason = _observe(k, facts.get(k), view.pods.get(k, ()), old, now, tiers, team_of)
        if rec is None:
            # Looked at again at the next pass (a DRA claim read later gives its GPUs), counted once.
            if reason and old is None and k not in skipped_keys:
                skipped_keys.add(k)
                skipped[reason] = skipped.get(reason, 0) + 1
            continue
        if (at := preempted.get(k)) is not None and (rec.preempted is None or at > rec.preempted):
            rec = replace(rec, preempted=at)
        if (began := ran_from.get(k)) is not None and (rec.started is None or began < rec.started):
            rec = replace(rec, started=max(began, rec.arrived))
        if rec != old:
            out.append(rec)
        if rec.ended is None:
            open_next[k] = rec
        else:
            closed.add(k)
    for k, old in previous.open.items():
        if k in open_next or k in facts or k in view.pods:
            continue
        # Gone with all its pods and its wait: deleted, unless it had already run to completion.
        outcome = "finished" if old.outcome == "finished" else "deleted"
        out.append(replace(old, ended=now, outcome=outcome))
    nodes_next, node_rows = _nodes(view.nodes, previous.nodes, now)
    # A workload skipped once stays skipped while it is seen; forget those no longer there.
    live = facts.keys() | view.pods.keys()
    state = ReplayState(open_next, nodes_next, frozenset(skipped_keys & live), frozenset(closed & live), now)
    return state, ReplayRows(tuple(out), node_rows, skipped)


def _observe(
    k: WorkloadKey,
    f: WorkloadFacts | None,
    pods: Sequence[Pod],
    old: WorkloadRecord | None,
    now: float,
    tiers: TierPolicy,
    team_of: Callable[[str], str],
) -> tuple[WorkloadRecord | None, str]:
    """Return the workload's record as this tick shows it (None and the reason when it is not recorded)."""
    live = [p for p in pods if not p.terminal]
    asked = [p for p in (live or pods) if p.gpus > 0]
    gpus_per_pod = max((p.gpus for p in asked), default=0)
    if f is not None:
        gpus_per_pod = max(gpus_per_pod, f.gpus_per_pod)
    if gpus_per_pod <= 0:
        return None, SKIP_NO_GPUS
    if f is not None:
        priority, tier = f.priority, f.tier
    else:
        top = max(asked, key=lambda p: p.priority)
        priority, tier = top.priority, tiers.tier_of(top.priority, top.priority_class).name
    if not tier:
        return None, SKIP_NO_TIER
    arrived = old.arrived if old is not None else _arrival(f, pods, now)
    n_pods = max(len([p for p in live if p.gpus > 0]), old.pods if old is not None else 0)
    gang_min = old.gang_min if old is not None else None
    form = old.form if old is not None else "pods"
    if f is not None:
        n_pods = max(n_pods, f.pods_expected, f.pods_pending + f.pods_running + f.pods_gated)
        form = f.source
        if f.pods_expected and (f.key.gang or f.source != "pods"):
            gang_min = f.pods_expected
    cpu = max((p.cpu_millis for p in asked), default=0)
    mem = max((p.memory_bytes for p in asked), default=0)
    started = old.started if old is not None else None
    bound = [p for p in live if p.bound]
    if f is None and bound and started is None:
        started = max(_bound_at(p, now) for p in bound)
    ended, outcome = None, ("running" if started is not None else "waiting")
    if f is None and pods and not live:
        # Every pod ran to its end (Succeeded or Failed): finished now, unless it never started.
        ended = now
        outcome = (
            "finished" if started is not None or any(p.phase == "Succeeded" for p in pods) else "deleted"
        )
        if started is None and outcome == "finished":
            started = min((p.start_time for p in pods if p.start_time is not None), default=None)
    elif f is not None and started is not None:
        outcome = "waiting"  # preempted, or requeued by Kueue: waits again, its first start kept
    return (
        WorkloadRecord(
            key=old.key if old is not None else workload_key(k, arrived),
            namespace=k.namespace,
            kind=k.kind,
            name=k.name,
            team=team_of(k.namespace),
            tier=tier,
            priority=priority,
            form=form,
            pods=max(n_pods, 1),
            gpus_per_pod=gpus_per_pod,
            cpu_millis_per_pod=cpu or None,
            memory_bytes_per_pod=mem or None,
            gang_min=gang_min,
            arrived=arrived,
            started=started,
            preempted=old.preempted if old is not None else None,
            ended=ended,
            outcome=outcome,
        ),
        "",
    )


def _arrival(f: WorkloadFacts | None, pods: Sequence[Pod], now: float) -> float:
    """Return when the workload arrived: its oldest pod's creation, or the start of the wait the queue
    read for it when it has no pods yet (a job Kueue or a quota holds)."""
    times = [p.created for p in pods]
    if f is not None and f.since is not None:
        times.append(f.since)
    return min(times, default=now)


def _bound_at(p: Pod, now: float) -> float:
    s = p.scheduled
    if s is not None and s.status == "True" and s.since is not None:
        return s.since
    return p.start_time if p.start_time is not None else now


def _nodes(
    nodes: Iterable[tuple[Node, int]], previous: Mapping[str, NodeRecord], now: float
) -> tuple[dict[str, NodeRecord], tuple[NodeRecord, ...]]:
    out: list[NodeRecord] = []
    nxt: dict[str, NodeRecord] = {}
    for n, gpus in nodes:
        old = previous.get(n.name)
        if old is None:
            rec = NodeRecord(n.name, gpus, n.cpu_millis, n.memory_bytes, now, now)
        else:
            rec = NodeRecord(
                n.name,
                max(gpus, old.gpus),
                max(n.cpu_millis, old.cpu_millis),
                max(n.memory_bytes, old.memory_bytes),
                old.first_seen,
                old.last_seen,
            )
            if rec != old or now - old.last_seen >= NODE_REFRESH:
                rec = replace(rec, last_seen=max(now, old.last_seen))
        if rec != old:
            out.append(rec)
        nxt[n.name] = rec
    return nxt, tuple(out)
