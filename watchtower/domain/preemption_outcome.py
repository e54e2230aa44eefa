"""Whether a preemption helped: did its preemptor start where its victims were evicted?

kube-scheduler's preemption (pkg/scheduler/framework/plugins/defaultpreemption, framework/preemption) picks a
node, evicts the victims there (their `DisruptionTarget` condition, reason `PreemptionByScheduler`, and a
`Preempted` event "Preempted by pod <uid> on node <node>"), and writes the node in the preemptor's
`status.nominatedNodeName`. The nomination is no reservation against everything: the preemptor is scheduled
again from the queue and binds wherever room appears first, a pod of higher priority may take the room the
victims left, and the preemptor may be deleted. Only in the first case did the victims' lost work buy
anything.

The book follows each preemptor (by pod uid) from its victims' eviction until it binds, is deleted or
`window` has passed, and resolves every victim of it to one `Outcome`. It holds only open preemptors (at
most `window` of them) and the outcomes of resolved ones until the ledger prunes their victims, so its
memory is bounded by the ledger's. Preemptors that are not a pod (a 1.36 gang's PodGroup, Kueue evicting a
Workload) are not judged: no node was nominated for them. A record that never names its preemptor's uid,
or names a pod never seen, is skipped and counted (`skips`), not guessed.
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from watchtower.domain.records import Pod

HELPED = "helped"
DID_NOT_HELP = "did_not_help"

# Why a preemption did not help.
STARTED_ELSEWHERE = "started_elsewhere"  # the preemptor bound to another node than its victims'
STILL_WAITING = "still_waiting"  # not bound when the window passed
ROOM_TAKEN = "room_taken"  # not bound when the window passed, and another pod bound where the victims were
DELETED = "deleted"  # the preemptor went away (or finished) without binding
REASONS = (STARTED_ELSEWHERE, STILL_WAITING, ROOM_TAKEN, DELETED)

# Why a record could not be judged (counted, never guessed).
SKIP_NO_UID = "no_preemptor_uid"  # the window passed and no record named the preemptor pod's uid
SKIP_UNKNOWN = "unknown_preemptor"  # the named preemptor pod was never seen in the window
SKIPS = (SKIP_NO_UID, SKIP_UNKNOWN)


@dataclass(frozen=True, slots=True)
class Outcome:
    """What a preemption came to. `node` is where the preemptor bound (helped or started elsewhere)."""

    verdict: str  # HELPED or DID_NOT_HELP
    reason: str  # "" when it helped, else one of REASONS
    at: float  # when it was resolved (the binding's time when known)
    node: str = ""
    victim_nodes: tuple[str, ...] = ()  # the nodes its victims were evicted from
    nominated: str = ""  # the preemptor's status.nominatedNodeName as last seen
    taken_by: str = ""  # namespace/name of a pod that bound where the victims were, after them, if one did
    victims: int = 0  # the victims it had when resolved
    gpu_hours_lost: float = 0.0  # what those victims had run, lost

    @property
    def helped(self) -> bool:
        return self.verdict == HELPED

    def words(self) -> str:
        """The outcome in the pages' words."""
        if self.helped:
            return f"helped: started on {self.node}"
        where = "/".join(self.victim_nodes) or "its victims' node"
        if self.reason == STARTED_ELSEWHERE:
            taken = f" ({self.taken_by} took the room)" if self.taken_by else ""
            return f"did not help: started on {self.node}, not on {where}{taken}"
        if self.reason == ROOM_TAKEN:
            return f"did not help: {self.taken_by} took the room on {where}; the preemptor still waits"
        if self.reason == DELETED:
            return "did not help: the preemptor was deleted before it started"
        return f"did not help: the preemptor still waits, {where} freed for nothing"


@dataclass(slots=True)
class _Open:
    since: float | None  # the earliest eviction of its victims; None until a tick dates it
    victims: set[str] = field(default_factory=set)
    nodes: set[str] = field(default_factory=set)
    nominated: str = ""
    taken_by: str = ""
    gpus: int = 0  # the preemptor's GPUs, once its pod is seen (0: not seen, or asks none)
    seen: bool = False  # its pod was seen


@dataclass(frozen=True, slots=True)
class Resolved:
    """Victims that came to an outcome (to stamp on their records and count once)."""

    preemptor_uid: str
    victims: tuple[str, ...]
    outcome: Outcome
    late: bool = False  # a victim named after its preemptor was resolved: it joins that outcome


@dataclass(frozen=True, slots=True)
class Skip:
    reason: str  # one of SKIPS
    victim_uid: str
    preemptor: str  # the uid, or namespace/name, or "" when nothing named it


@dataclass(slots=True)
class OutcomeBook:
    """Open preemptors and what became of the resolved ones. Pure: times come from records or `now`."""

    open: dict[str, _Open] = field(default_factory=dict)  # by preemptor pod uid
    by_node: dict[str, set[str]] = field(default_factory=dict)  # victims' node → open preemptors there
    resolved: dict[str, Outcome] = field(default_factory=dict)  # by preemptor uid, until pruned
    judged_victims: dict[str, set[str]] = field(default_factory=dict)  # the victims stamped, by preemptor
    # Victims whose record names no preemptor uid yet (the condition came before the event) → since.
    unnamed: dict[str, tuple[float | None, str]] = field(default_factory=dict)
    skips: Counter[str] = field(default_factory=Counter)
    _due: list[tuple[float, str]] = field(default_factory=list)  # (since, preemptor uid), a heap
    _undated: list[str] = field(default_factory=list)  # open preemptors with no time yet
    _out: list[Resolved] = field(default_factory=list)
    _skipped: list[Skip] = field(default_factory=list)

    # ---- records ------------------------------------------------------------------------------------

    def track(
        self,
        victim_uid: str,
        *,
        preemptor_uid: str,
        preemptor_ref: str,
        node: str,
        at: float | None,
        judged: bool,
        pods: Mapping[str, Pod],
    ) -> None:
        """Take a victim's record (new, or completed with its preemptor's uid or an earlier time)."""
        if not judged:
            self.unnamed.pop(victim_uid, None)
            return
        if not preemptor_uid:
            if victim_uid not in self.unnamed:
                self.unnamed[victim_uid] = (at, preemptor_ref)
            return
        self.unnamed.pop(victim_uid, None)
        done = self.resolved.get(preemptor_uid)
        if done is not None:
            self._out.append(Resolved(preemptor_uid, (victim_uid,), done, late=True))
            return
        o = self.open.get(preemptor_uid)
        if o is None:
            o = self.open[preemptor_uid] = _Open(since=at)
            if at is None:
                self._undated.append(preemptor_uid)
            else:
                heapq.heappush(self._due, (at, preemptor_uid))
        elif at is not None and (o.since is None or at < o.since):
            o.since = at
            heapq.heappush(self._due, (at, preemptor_uid))
        o.victims.add(victim_uid)
        if node and node not in o.nodes:
            o.nodes.add(node)
            self.by_node.setdefault(node, set()).add(preemptor_uid)
        pod = pods.get(preemptor_uid)
        if pod is not None:
            self.pod_changed(None, pod)

    # ---- pods ---------------------------------------------------------------------------------------

    def pod_changed(self, old: Pod | None, pod: Pod) -> None:
        """Take a pod's new object: a preemptor that binds or finishes resolves; another pod that binds on
        a node victims left is remembered as what may have taken their room."""
        o = self.open.get(pod.uid)
        if o is not None:
            o.seen = True
            o.gpus = pod.gpus
            if pod.nominated_node:
                o.nominated = pod.nominated_node
            if pod.node:
                self._bound(pod.uid, o, pod.node, pod.scheduled_at)
            elif pod.terminal or pod.deleted_at is not None:
                self._resolve(pod.uid, o, DID_NOT_HELP, DELETED, at=pod.deleted_at)
            return
        if pod.node and (old is None or not old.node) and pod.node in self.by_node:
            bound = pod.scheduled_at
            for uid in self.by_node[pod.node]:
                w = self.open[uid]
                if w.taken_by or (bound is not None and w.since is not None and bound < w.since):
                    continue
                if w.gpus and not pod.gpus:
                    continue  # the preemptor waits for GPUs: a pod without any took nothing of them
                w.taken_by = f"{pod.namespace}/{pod.name}"

    def pod_gone(self, uid: str, last: Pod | None) -> None:
        """A pod was deleted: a preemptor that never bound did not get to use the room."""
        o = self.open.get(uid)
        if o is None:
            return
        if last is not None and last.node:
            self._bound(uid, o, last.node, last.scheduled_at)
        else:
            self._resolve(uid, o, DID_NOT_HELP, DELETED, at=last.deleted_at if last else None)

    # ---- time ---------------------------------------------------------------------------------------

    def expire(self, now: float, window: float, pods: Mapping[str, Pod]) -> None:
        """Resolve (or skip) what the window has passed for."""
        for uid in self._undated:
            o = self.open.get(uid)
            if o is not None and o.since is None:
                o.since = now
                heapq.heappush(self._due, (now, uid))
        self._undated.clear()
        due = self._due
        while due and due[0][0] + window <= now:
            since, uid = heapq.heappop(due)
            o = self.open.get(uid)
            if o is None or o.since != since:
                continue  # resolved since, or an earlier eviction re-queued it
            if not o.seen and uid not in pods:
                self._forget(uid, o)
                for v in sorted(o.victims):
                    self._skip(SKIP_UNKNOWN, v, uid)
                continue
            reason = ROOM_TAKEN if o.taken_by else STILL_WAITING
            self._resolve(uid, o, DID_NOT_HELP, reason, at=now)
        if self.unnamed:
            for v, (at, ref) in list(self.unnamed.items()):
                if at is None:
                    self.unnamed[v] = (now, ref)
                elif at + window <= now:
                    del self.unnamed[v]
                    self._skip(SKIP_NO_UID, v, ref)

    def take(self) -> tuple[list[Resolved], list[Skip]]:
        """Return what resolved and what was skipped since the last call (each once)."""
        out, skipped = self._out, self._skipped
        self._out, self._skipped = [], []
        return out, skipped

    def prune(self, keep: Iterable[str]) -> None:
        """Forget the outcomes of preemptors no kept record names."""
        kept = set(keep)
        for uid in [u for u in self.resolved if u not in kept]:
            del self.resolved[uid]
            self.judged_victims.pop(uid, None)
        for v in [v for v in self.unnamed if v not in kept]:
            del self.unnamed[v]

    # ---- inside -------------------------------------------------------------------------------------

    def _bound(self, uid: str, o: _Open, node: str, at: float | None) -> None:
        if node in o.nodes or (not o.nodes and node == o.nominated):
            self._resolve(uid, o, HELPED, "", at=at, node=node)
        else:
            self._resolve(uid, o, DID_NOT_HELP, STARTED_ELSEWHERE, at=at, node=node)

    def _resolve(
        self, uid: str, o: _Open, verdict: str, reason: str, *, at: float | None, node: str = ""
    ) -> None:
        self._forget(uid, o)
        outcome = Outcome(
            verdict=verdict,
            reason=reason,
            at=at if at is not None else o.since if o.since is not None else 0.0,
            node=node,
            victim_nodes=tuple(sorted(o.nodes)),
            nominated=o.nominated,
            taken_by=o.taken_by,
            victims=len(o.victims),
        )
        self.resolved[uid] = outcome
        self._out.append(Resolved(uid, tuple(sorted(o.victims)), outcome))

    def _forget(self, uid: str, o: _Open) -> None:
        del self.open[uid]
        for n in o.nodes:
            there = self.by_node.get(n)
            if there is not None:
                there.discard(uid)
                if not there:
                    del self.by_node[n]

    def _skip(self, reason: str, victim: str, preemptor: str) -> None:
        self.skips[reason] += 1
        self._skipped.append(Skip(reason, victim, preemptor))
