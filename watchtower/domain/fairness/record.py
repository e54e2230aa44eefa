"""What one Tick adds to the fairness history: the episodes that opened, changed or closed, the preemptions
and incidents not recorded before, as a difference against the previous tick's recorded state.

Pure: the previous state goes in, the next state and the records to upsert come out. A tick on a queue of
20,000 workloads whose waits go on unchanged yields no records and costs one identity test; after churn only
the workloads the queue's order took out or put in (`Tick.facts_change`) are looked at.
Every key is built from facts the cluster keeps (the workload's namespace, kind and name, the time its wait
began, a victim pod's uid and preemption time), so a restart, a re-list or a second replica builds the same
keys and the store's upsert counts each fact once.
"""

from __future__ import annotations

import heapq
import math
import operator
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from watchtower.domain.queue_values import WAITING_STATES, WorkloadFacts, WorkloadState

from ..disruptions import Preemption
from ..queue_order import QueueChange
from ..tick import Tick
from ..tiers import TierPolicy
from ..workloads import WorkloadKey
from .history import Incident, PreemptionRecord, WaitEpisode, WaitOutcome, WaitSource

# FairnessHistory keeps one heartbeat row per minute of cluster time the service recorded.
HEARTBEAT_EVERY = 60.0

# The queue's `source` (what the wait was read from) → the history's: a gang held by its PodGroup (upstream
# or Volcano, or the PaddleJob operator's), a Workload Kueue has not admitted, a ResourceQuota refusal, pods.
_SOURCES: dict[str, WaitSource] = {
    "pods": "pod",
    "podgroup": "podgroup",
    "volcano-podgroup": "podgroup",
    "paddlejob": "podgroup",
    "kueue": "kueue",
    "quota": "quota",
}


def wait_source(queue_source: str) -> WaitSource:
    """Return the history's source for the queue's `source` of a workload ("pod" for any other)."""
    return _SOURCES.get(queue_source, "pod")


def workload_name(key: WorkloadKey) -> str:
    return f"{key.kind}/{key.name}"


def episode_key(key: WorkloadKey, started: float) -> str:
    """Return the episode's key: the workload and the second its wait began. The source is not part of it:
    a refused job whose pods are then made waits on, as one episode, and the episode keeps its latest source."""
    return f"wait:{key.namespace}/{key.kind}/{key.name}@{started:.0f}"


def incident_key(kind: str, episode: str) -> str:
    return f"{kind}:{episode.removeprefix('wait:')}"


def preemption_key(p: Preemption) -> str:
    """Return the preemption's key: the victim pod's uid, which is preempted once (it is deleted); its time
    is left out because it moves earlier when the DisruptionTarget condition is read after the event. A
    Kueue Workload is evicted, requeued and may be preempted again: its key adds the time."""
    if p.preemptor_kind == "KueueWorkload":
        return f"preempt:{p.victim_uid}@{p.at or 0:.0f}"
    return f"preempt:{p.victim_uid}"


@dataclass(frozen=True, slots=True)
class OpenWait:
    """A workload's episode that was still open at the last recorded tick, with its open incidents."""

    episode: WaitEpisode
    starvation: Incident | None = None
    gang_stall: Incident | None = None
    # The facts the episode was made from: the queue hands out the same object while nothing about the
    # workload changed, so most ticks compare identities and build nothing.
    facts: WorkloadFacts | None = None
    due: float = math.inf  # when an incident of this wait may begin next (its starvation, its gang stall)


@dataclass(frozen=True, slots=True)
class RecordedState:
    """What the last tick recorded: the open episodes by workload, the preemption keys seen, the last
    heartbeat minute. A restart starts from the open episodes and incidents the store still has."""

    open: dict[WorkloadKey, OpenWait] = field(default_factory=dict)
    # The preemptions of the snapshot's window as last recorded, with the queue's record each was made
    # from: one is written again when it learns more (its preemptor, an earlier time).
    preemptions: dict[str, tuple[Preemption, PreemptionRecord]] = field(default_factory=dict)
    heartbeat: float | None = None
    # The last recorded tick's list of facts, held (so no new list can take its identity): the next tick's
    # list is either the same object (nothing changed) or one change of it (`Tick.facts_change`). None
    # before the first tick: even an empty queue then closes the open waits read back from the store.
    facts: Sequence[WorkloadFacts] | None = None
    # A heap of (time, workload): when an open wait may begin an incident; an entry whose time is no longer
    # its wait's `due` is stale and dropped when it comes up.
    due: tuple[tuple[float, WorkloadKey], ...] = ()


@dataclass(frozen=True, slots=True)
class TickRecords:
    episodes: tuple[WaitEpisode, ...] = ()
    preemptions: tuple[PreemptionRecord, ...] = ()
    incidents: tuple[Incident, ...] = ()
    heartbeats: tuple[float, ...] = ()  # the minutes to mark as recorded, when there are new ones

    @property
    def empty(self) -> bool:
        return not (self.episodes or self.preemptions or self.incidents or self.heartbeats)


@dataclass(frozen=True, slots=True)
class RecordPolicy:
    tiers: TierPolicy
    gang_stall_after: float  # the WorkloadGangStalled rule's limit (alerting.rules.gang_stall_after)
    team_of: Callable[[str], str]  # namespace → team
    # Ticks this far apart or closer count as recording the minutes between them (queue.evaluate_every
    # may exceed a minute); a longer gap is the service not running.
    heartbeat_gap: float = 120.0


def state_from_store(episodes: Iterable[WaitEpisode], incidents: Iterable[Incident]) -> RecordedState:
    """Return the state to start from after a restart: the store's open episodes (by workload, read back
    from their names) and their open incidents, so that what ended while the service was down is closed
    at the first tick instead of staying open forever."""
    open_: dict[WorkloadKey, OpenWait] = {}
    by_incident: dict[str, WorkloadKey] = {}
    for e in episodes:
        if e.ended is not None:
            continue
        kind, _, name = e.workload.partition("/")
        wk = WorkloadKey(e.namespace, kind, name)
        open_[wk] = OpenWait(e)
        for k in ("starvation", "gang_stall"):
            by_incident[incident_key(k, e.key)] = wk
    for i in incidents:
        found = by_incident.get(i.key)
        if i.ended is not None or found is None:
            continue
        ow = open_[found]
        open_[found] = replace(ow, starvation=i) if i.kind == "starvation" else replace(ow, gang_stall=i)
    return RecordedState(open=open_)


_FACTS = operator.attrgetter("facts")


def record_tick(
    tick: Tick,
    previous: RecordedState,
    policy: RecordPolicy,
    *,
    present: Callable[[WorkloadKey], bool],
) -> tuple[RecordedState, TickRecords]:
    """Return the next recorded state and what to upsert for `tick`: episodes opened, changed (GPUs, tier,
    source) or closed, incidents opened or closed, preemptions not seen before, and a heartbeat minute.

    An episode whose workload no longer waits is closed at this tick: `scheduled` (`admitted` when Kueue held
    it) while the workload is `present`, `gone` when it was deleted while waiting. A workload that waits
    again from a later start (preempted, requeued) closes its old episode and opens a new one."""
    now = tick.at
    # The evaluation hands out the same list of facts while nothing changed: then nothing is walked.
    facts: Sequence[WorkloadFacts] = tick.listed_facts or tuple(map(_FACTS, tick.snapshot.workloads))
    due = previous.due
    out_episodes: list[WaitEpisode] = []
    out_incidents: list[Incident] = []
    if facts is not previous.facts or (due and due[0][0] <= now):
        open_next, due = _waits(
            facts, tick.facts_change, previous, policy, now, present, out_episodes, out_incidents
        )
    else:
        # No workload's facts changed and no wait reaches a threshold: the usual tick, one identity test.
        open_next = previous.open
    out_pre: list[PreemptionRecord] = []
    current: dict[str, tuple[Preemption, PreemptionRecord]] = {}
    for p in tick.snapshot.preemptions:
        if p.at is None or not p.victim_uid:
            continue  # no time: it belongs to no week
        k = preemption_key(p)
        seen = previous.preemptions.get(k)
        if seen is not None and seen[0] is p:
            current[k] = seen
            continue
        rec = _preemption(p, k, policy)
        current[k] = (p, rec)
        if seen is None or seen[1] != rec:
            out_pre.append(rec)
    minute = now - now % HEARTBEAT_EVERY
    last = previous.heartbeat
    beats: tuple[float, ...] = ()
    if last is None or minute - last > policy.heartbeat_gap or minute < last:
        beats = (minute,)
    elif minute > last:
        beats = tuple(
            last + HEARTBEAT_EVERY * i for i in range(1, int((minute - last) // HEARTBEAT_EVERY) + 1)
        )
    state = RecordedState(
        open=open_next,
        preemptions=current,
        heartbeat=max(minute, last or minute),
        facts=facts,
        due=due,
    )
    return state, TickRecords(tuple(out_episodes), tuple(out_pre), tuple(out_incidents), beats)


def _waits(
    facts: Sequence[WorkloadFacts],
    change: QueueChange | None,
    previous: RecordedState,
    policy: RecordPolicy,
    now: float,
    present: Callable[[WorkloadKey], bool],
    out_episodes: list[WaitEpisode],
    out_incidents: list[Incident],
) -> tuple[dict[WorkloadKey, OpenWait], tuple[tuple[float, WorkloadKey], ...]]:
    """Return the open waits and the due heap after this tick; append the episodes and incidents to write.

    Only the workloads whose facts are new, whose wait reaches a threshold, or that left the queue are
    looked at. When this tick's facts are one change of the last recorded ones (the usual tick after
    churn) that change names them, and no other workload is touched; otherwise (the first tick, a restart,
    a tick not recorded) every workload's facts are compared with its open wait's by key."""
    open_ = previous.open
    touched: dict[WorkloadKey, WorkloadFacts] = {}
    if facts is previous.facts:
        left: set[WorkloadKey] = set()
    elif change is not None and previous.facts is not None and change.base is previous.facts:
        for f in change.added:
            touched[f.key] = f
        left = {f.key for f in change.removed if f.key not in touched and f.key in open_}
    else:
        seen: set[WorkloadKey] = set()
        for f in facts:
            k = f.key
            seen.add(k)
            ow = open_.get(k)
            if ow is None or ow.facts is not f:
                touched[k] = f
        left = open_.keys() - seen
    heap = list(previous.due)
    while heap and heap[0][0] <= now:
        at, k = heapq.heappop(heap)
        ow = open_.get(k)
        # A stale entry (the wait's due moved, or its facts were replaced or left) is dropped.
        if ow is not None and ow.due == at and ow.facts is not None and k not in left:
            touched.setdefault(k, ow.facts)
    if not touched and not left:
        return open_, tuple(heap)
    open_next = dict(open_)
    for k, f in touched.items():
        old = open_next.get(k)
        if f.state not in WAITING_STATES or f.since is None:
            if old is not None:
                _close_into(old, k, now, present, out_episodes, out_incidents)
                del open_next[k]
            continue
        if old is not None and old.facts is f:
            ow = old
        else:
            ow = _changed(f, f.since, old, now, present, out_episodes, out_incidents)
        ow, incs = _incidents(f, f.wait_at(now), ow, now, policy)
        out_incidents.extend(incs)
        ow = replace(ow, due=_due(ow, f, policy.gang_stall_after))
        open_next[k] = ow
        if ow.due != math.inf and (old is None or old.due != ow.due):
            heapq.heappush(heap, (ow.due, k))
    for k in left:
        _close_into(open_next.pop(k), k, now, present, out_episodes, out_incidents)
    return open_next, tuple(heap)


def _due(ow: OpenWait, f: WorkloadFacts, stall_after: float) -> float:
    """Return when this wait may begin its next incident; inf when none can."""
    due = math.inf
    if ow.starvation is None and f.since is not None:
        due = f.since + f.critical_after
    if ow.gang_stall is None and f.state is WorkloadState.PARTIAL and f.key.gang and f.since is not None:
        due = min(due, f.since + stall_after)
    return due


def _close_into(
    old: OpenWait,
    k: WorkloadKey,
    now: float,
    present: Callable[[WorkloadKey], bool],
    out_episodes: list[WaitEpisode],
    out_incidents: list[Incident],
) -> None:
    placed: WaitOutcome = "admitted" if old.episode.source == "kueue" else "scheduled"
    closed, incs = _close(old, now, placed if present(k) else "gone")
    out_episodes.append(closed)
    out_incidents.extend(incs)


def _changed(
    w: WorkloadFacts,
    started: float,
    old: OpenWait | None,
    now: float,
    present: Callable[[WorkloadKey], bool],
    out_episodes: list[WaitEpisode],
    out_incidents: list[Incident],
) -> OpenWait:
    """Return the open wait of a workload whose facts are new: its episode built again, written when it
    differs; an old episode of an earlier start is closed first."""
    key = episode_key(w.key, started)
    if old is not None and old.episode.key != key:
        closed, incs = _close(old, now, "scheduled" if present(w.key) else "gone")
        out_episodes.append(closed)
        out_incidents.extend(incs)
        old = None
    ep = _episode(w, key, started)
    if old is None or old.episode != ep:
        out_episodes.append(ep)
    return OpenWait(ep, old.starvation if old else None, old.gang_stall if old else None, w)


def _episode(w: WorkloadFacts, key: str, started: float) -> WaitEpisode:
    return WaitEpisode(
        key=key,
        source=wait_source(w.source),
        namespace=w.key.namespace,
        team=w.team,
        tier=w.tier,
        workload=workload_name(w.key),
        gpus=w.gpus_requested,
        started=started,
        ended=None,
        outcome="waiting",
    )


def _incidents(
    f: WorkloadFacts, wait: float, ow: OpenWait, now: float, policy: RecordPolicy
) -> tuple[OpenWait, tuple[Incident, ...]]:
    starving = ow.starvation is None and wait >= f.critical_after
    stalled = f.state is WorkloadState.PARTIAL and f.key.gang and wait >= policy.gang_stall_after
    if not starving and (ow.gang_stall is not None) == stalled:
        return ow, ()  # the common case, on every tick for every waiting workload
    out: list[Incident] = []
    ep = ow.episode
    if starving:
        inc = _incident("starvation", ep, ep.started + f.critical_after)
        ow = replace(ow, starvation=inc)
        out.append(inc)
    if ow.gang_stall is None and stalled:
        inc = _incident("gang_stall", ep, ep.started + policy.gang_stall_after)
        ow = replace(ow, gang_stall=inc)
        out.append(inc)
    elif ow.gang_stall is not None and not stalled:
        # The gang is no longer partly placed (all placed, or all evicted): the stall is over, the wait not.
        out.append(replace(ow.gang_stall, ended=now))
        ow = replace(ow, gang_stall=None)
    return ow, tuple(out)


def _incident(kind: str, ep: WaitEpisode, started: float) -> Incident:
    return Incident(
        key=incident_key(kind, ep.key),
        kind="starvation" if kind == "starvation" else "gang_stall",
        namespace=ep.namespace,
        team=ep.team,
        tier=ep.tier,
        workload=ep.workload,
        gpus=ep.gpus,
        started=started,
        ended=None,
    )


def _close(ow: OpenWait, now: float, outcome: WaitOutcome) -> tuple[WaitEpisode, tuple[Incident, ...]]:
    ep = replace(ow.episode, ended=now, outcome=outcome)
    incs = tuple(replace(i, ended=now) for i in (ow.starvation, ow.gang_stall) if i is not None)
    return ep, incs


def _preemption(p: Preemption, key: str, policy: RecordPolicy) -> PreemptionRecord:
    tiers = policy.tiers
    victim, pre_ns, pre_kind = p.victim_workload, p.preemptor_namespace, p.preemptor_kind or "Pod"
    return PreemptionRecord(
        key=key,
        at=p.at if p.at is not None else 0.0,
        victim_namespace=p.victim_namespace,
        victim_team=policy.team_of(p.victim_namespace),
        victim_tier=p.victim_tier(tiers) or "unknown",
        victim_workload=workload_name(victim) if victim is not None else f"Pod/{p.victim_name}",
        preemptor_namespace=pre_ns,
        preemptor_team=policy.team_of(pre_ns) if pre_ns else "",
        preemptor_tier=p.preemptor_tier(tiers) or "unknown",
        preemptor_workload=f"{pre_kind}/{p.preemptor_name}" if p.preemptor_name else "",
        gpus=p.victim_gpus or 0,
        gpu_hours_lost=p.gpu_hours_lost,
        outcome=p.outcome.verdict if p.outcome is not None else "",
        outcome_reason=p.outcome.reason if p.outcome is not None else "",
    )
