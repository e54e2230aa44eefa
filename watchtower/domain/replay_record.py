"""What a policy replay of a recorded week needs (issue 31, docs/replay.md): one row per GPU workload (its
arrival, tier and priority, team, pods and their GPUs, CPU and memory, gang minimum, the form it waited in,
when it started, was last preempted and ended) and one row per node (its GPUs, CPU and memory, when it was
first and last seen), derived from what the recorder sees at a tick, as a difference against what it wrote
before.

No I/O and no clock (`now` is the view's): the recorder's state goes in, is brought to this pass in place
(it is a cluster's worth: copying it at every pass would cost more than the pass), and the rows to upsert
come out. Only the workloads the state's change log names since the last pass are looked at, so a pass on
a busy cluster costs what changed, not its size (bench/replay_record.py). Every row is keyed by
facts the cluster keeps (the workload's namespace, kind and name and the second it arrived; the node's
name), and every time in it is one the store merges by rule (the earliest start and end, the latest
preemption and sighting), so two replicas or a restart write rows that merge to the same ones.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable, Mapping, Sequence, Set
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
    """What the recorder reads at one tick: the waiting workloads' facts, the pods of the workloads to look
    at, the nodes and the preemptions the tick knows. `touched`: the workloads whose pods or facts changed
    since the last pass (the state's change log), `pods` then holding theirs; None: look at every workload
    (the first pass, a restart, a change log read from the start again), `pods` holding every workload's."""

    now: float
    facts: Sequence[WorkloadFacts]
    pods: Mapping[WorkloadKey, Sequence[Pod]]
    nodes: Iterable[tuple[Node, int]]  # each node with its GPUs (device plugin and DRA)
    preemptions: Sequence[Preemption] = ()
    touched: Set[WorkloadKey] | None = None


@dataclass(slots=True)
class ReplayState:
    """What the recorder knows between passes. Changed in place by `record_replay` (one owner, the
    recorder): copying a cluster's worth of it at every pass would cost more than the pass."""

    open: dict[WorkloadKey, WorkloadRecord] = field(default_factory=dict)
    nodes: dict[str, NodeRecord] = field(default_factory=dict)
    skipped: set[WorkloadKey] = field(default_factory=set)  # counted once each
    # Ended while their pods are still listed (a finished Job's completed pods): not looked at again.
    closed: set[WorkloadKey] = field(default_factory=set)
    last_pass: float | None = None
    # Each workload's facts and pods as last looked at (see record_replay).
    seen: dict[WorkloadKey, tuple[object, ...]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class ReplayRows:
    workloads: tuple[WorkloadRecord, ...] = ()
    nodes: tuple[NodeRecord, ...] = ()
    skipped: Mapping[str, int] = field(default_factory=dict)  # reason -> workloads newly skipped

    @property
    def empty(self) -> bool:
        return not (self.workloads or self.nodes)


_KEY = operator.attrgetter("key")


def view_of(tick: Tick, state: ClusterState, touched: Set[WorkloadKey] | None = None) -> ClusterView:
    """Return what the recorder reads at `tick`: its waiting facts and preemptions, the state's nodes, and
    the pods of the `touched` workloads and of the preemptions' victims (of every workload when `touched`
    is None). Read on the event loop, between the state's updates."""
    pods, by_workload = state.pods, state.by_workload
    preemptions = tick.snapshot.preemptions
    if touched is None:
        keys: Iterable[WorkloadKey] = by_workload.keys()
    else:
        keys = set(touched).union(p.victim_workload for p in preemptions if p.victim_workload is not None)
    no_uids: set[str] = set()
    dra = state.dra.node_gpus()  # as state.node_gpus, its DRA count made once for every node
    return ClusterView(
        now=tick.at,
        facts=tick.listed_facts or tuple(w.facts for w in tick.snapshot.workloads),
        pods={k: [pods[u] for u in uids if u in pods] for k in keys if (uids := by_workload.get(k, no_uids))},
        nodes=[(n, n.gpus + dra.get(n.name, 0)) for n in state.nodes.values()],
        preemptions=preemptions,
        touched=touched,
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
    state: ReplayState,
    tiers: TierPolicy,
    team_of: Callable[[str], str],
) -> ReplayRows:
    """Bring `state` to this pass (in place) and return the rows to upsert: each workload whose record
    changed (arrived, started, preempted, ended, its shape or tier), each node new, changed or due for its
    `last_seen` refresh.

    Only the workloads `view.touched` names (and the preemptions' victims) are looked at, unless it is
    None. A workload without GPUs, or whose tier cannot be told, is skipped and counted once (`skipped`)."""
    now = view.now
    preempted: dict[WorkloadKey, float] = {}
    # A victim's start, as the preemption recorded it: a run shorter than a pass is seen only there.
    ran_from: dict[WorkloadKey, float] = {}
    for p in view.preemptions:
        k = p.victim_workload
        if k is not None and p.at is not None:
            preempted[k] = max(p.at, preempted.get(k, p.at))
            if p.victim_started is not None:
                ran_from[k] = min(p.victim_started, ran_from.get(k, p.victim_started))
    # The victims whose record the preemptions tell something new (a later preemption, an earlier start):
    # the others were written at an earlier pass, and the tick carries the window's preemptions every time.
    fresh: set[WorkloadKey] = set()
    for k, at in preempted.items():
        old = state.open.get(k)
        if old is None:
            # Never looked at yet; one looked at before was recorded, skipped or closed then.
            new = k not in state.seen and k not in state.closed
        else:
            ran = ran_from.get(k)
            later = old.preempted is None or at > old.preempted
            new = later or (ran is not None and (old.started is None or max(ran, old.arrived) < old.started))
        if new:
            fresh.add(k)
    out: list[WorkloadRecord] = []
    skipped: dict[str, int] = {}
    open_, seen, closed = state.open, state.seen, state.closed
    if view.touched is None:
        facts = {f.key: f for f in view.facts if f.state in WAITING_STATES}
        keys: Set[WorkloadKey] = facts.keys() | view.pods.keys()
        # Every open workload not seen any more is gone; the sets keep only what is still there.
        gone: Set[WorkloadKey] = open_.keys() - keys
        state.seen = {k: v for k, v in seen.items() if k in keys}
        state.skipped &= keys
        state.closed &= keys
        seen, closed = state.seen, state.closed
    else:
        keys = view.touched | fresh
        # Only the looked-at workloads' facts are wanted: the index is made in C, the filter applied to them.
        every = dict(zip(map(_KEY, view.facts), view.facts, strict=True))
        facts = {k: f for k in keys if (f := every.get(k)) is not None and f.state in WAITING_STATES}
        gone = {k for k in keys if k not in facts and k not in view.pods}
        state.skipped -= gone
        closed -= gone
    for k in gone:
        seen.pop(k, None)
        old = open_.pop(k, None)
        if old is not None:
            # Gone with all its pods and its wait before it ran to completion: deleted.
            out.append(replace(old, ended=now, outcome="deleted"))
    no_pods: Sequence[Pod] = ()
    for k in keys:
        if k in closed or k in gone:
            continue
        old = open_.get(k)
        f, pods = facts.get(k), view.pods.get(k, no_pods)
        # What the record is made from, by identity (facts and pods are replaced, never changed in place):
        # a workload seen the same, and not in a preemption, is carried over without a look.
        sig = (f, *pods)
        if seen.get(k) == sig and k not in fresh:
            continue
        seen[k] = sig
        rec, reason = _observe(k, f, pods, old, now, tiers, team_of)
        if rec is None:
            # Looked at again when it changes (a DRA claim read later gives its GPUs), counted once.
            if reason and old is None and k not in state.skipped:
                state.skipped.add(k)
                skipped[reason] = skipped.get(reason, 0) + 1
            continue
        if (last := preempted.get(k)) is not None and (rec.preempted is None or last > rec.preempted):
            rec = replace(rec, preempted=last)
        if (began := ran_from.get(k)) is not None and (rec.started is None or began < rec.started):
            rec = replace(rec, started=max(began, rec.arrived))
        if rec != old:
            out.append(rec)
        if rec.ended is None:
            open_[k] = rec
        else:
            open_.pop(k, None)
            closed.add(k)
    state.last_pass = now
    return ReplayRows(tuple(out), _nodes(view.nodes, state.nodes, now), skipped)


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
    nodes: Iterable[tuple[Node, int]], known: dict[str, NodeRecord], now: float
) -> tuple[NodeRecord, ...]:
    """Update `known` to the nodes seen now (a node gone is dropped: its last sighting stays what was
    written) and return the rows to write."""
    out: list[NodeRecord] = []
    here: set[str] = set()
    for n, gpus in nodes:
        here.add(n.name)
        old = known.get(n.name)
        if (
            old is not None
            and gpus <= old.gpus
            and n.cpu_millis <= old.cpu_millis
            and n.memory_bytes <= old.memory_bytes
            and old.last_seen <= now < old.last_seen + NODE_REFRESH
        ):
            continue  # the usual pass: nothing new about it, its sighting not due
        if old is None:
            rec = NodeRecord(n.name, gpus, n.cpu_millis, n.memory_bytes, now, now)
        else:
            rec = NodeRecord(
                n.name,
                max(gpus, old.gpus),
                max(n.cpu_millis, old.cpu_millis),
                max(n.memory_bytes, old.memory_bytes),
                old.first_seen,
                max(now, old.last_seen),
            )
        if rec != old:
            out.append(rec)
        known[n.name] = rec
    for name in known.keys() - here:
        del known[name]
    return tuple(out)
