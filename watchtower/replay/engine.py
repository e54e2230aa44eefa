"""The replay engine: a trace's jobs run through a policy, event by event (arrivals, finishes, ends of a
termination grace), never stepped through time, so a week takes as long as its events do.

The model, in kube-scheduler's terms (docs/replay.md says more):
- Pending jobs are tried in priority order, then by the time they (re)joined the queue; a job that does not fit
  is passed over and the next one is tried (no head-of-line blocking, as kube-scheduler does).
- A job is placed whole: every pod at once or none (a gang; a job's `gang_min` is recorded, not yet used),
  each pod on one node with room for its GPUs (and its CPU and memory, where both the job and the node say),
  filling the fullest node that fits first so that whole nodes stay free for large pods.
- A team's quota (GPUs it may hold at once) and its ClusterQueue's nominal quota and borrowing limit are
  checked before the nodes: a job over quota waits, as a pod refused by a ResourceQuota is retried.
- A job that fits nowhere may preempt running jobs of a strictly lower priority that its tier's rule allows
  and that are preemptible: the lowest priorities first, the most recently started first among equals, then
  every victim whose removal is not needed is spared. The victims hold their GPUs for the termination grace;
  the preemptor's place is reserved at once and it starts when the grace ends.
- A victim rejoins the queue when its grace ends. Under `restart` it keeps the work up to its last checkpoint
  (none without `checkpoint_every`); under `resume` it keeps all of it. The work lost is counted in GPU-hours.
- A job that could never run (larger than any node or the whole cluster, or than its quota) is refused with
  the reason, and takes no part in the run.
The engine draws no random numbers: the same trace under the same policy gives the same result.

Size: over 400 lines because placement, quota, preemption and the event heap share one mutable picture
of the cluster (free GPUs per node, held quota, the running set); split apart, each would reach into the
others' state on every event, where the replay's speed is spent.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence
from dataclasses import dataclass

from .policy import ReplayPolicy
from .trace import TraceJob

_FINISH, _GRACE_END, _ARRIVAL = 0, 1, 2  # at one instant: capacity freed before new work arrives
_PENDING, _RUNNING, _RESERVED, _TERMINATING, _DONE, _REFUSED = range(6)
_MIB = 2**20


@dataclass(frozen=True, slots=True)
class JobOutcome:
    """What became of one job in a replay."""

    id: str
    team: str
    tier: str
    priority: int
    gpus: int
    submitted: float
    started: float | None  # its first start; None: refused, or still waiting when the run ended
    finished: float | None
    waited: float  # seconds pending in all, every wait after a preemption included
    preemptions: int  # times it was preempted
    gpu_hours_lost: float  # work redone after its preemptions, in GPU-hours
    gpu_hours: float  # GPU-hours it held (the ends of its graces included)
    refused: str | None = None  # why it could never run


@dataclass(frozen=True, slots=True)
class Replay:
    """A finished replay: each job's outcome and the cluster's figures."""

    policy: str
    jobs: tuple[JobOutcome, ...]  # in the trace's order
    capacity_gpus: int
    start: float  # the first submission
    end: float  # the last event
    busy_gpu_seconds: float  # GPUs held by jobs, graces included, over [start, end]

    @property
    def utilisation(self) -> float | None:
        span = (self.end - self.start) * self.capacity_gpus
        return self.busy_gpu_seconds / span if span > 0 else None


@dataclass(frozen=True, slots=True)
class _Need:
    pods: int
    gpus: int  # per pod
    cpu: float  # millicores per pod (0: not asked)
    memory: float  # bytes per pod (0: not asked)


def _covers(failed: _Need, need: _Need) -> bool:
    """Return whether `need` asks at least as much as `failed` in every way, so it cannot fit where `failed`
    did not."""
    return (
        need.pods >= failed.pods
        and need.gpus >= failed.gpus
        and need.cpu >= failed.cpu
        and need.memory >= failed.memory
    )


def _fit(
    need: _Need, gpus: Sequence[float], cpu: Sequence[float], memory: Sequence[float]
) -> list[tuple[int, int]] | None:
    """Return [(node, pods)] placing every pod of `need` on nodes with these free amounts, the fullest node
    that fits first; None when they do not all fit."""

    def room(n: int) -> int:
        k = int(gpus[n] // need.gpus) if need.gpus else need.pods
        if need.cpu:
            k = min(k, int(cpu[n] // need.cpu))
        if need.memory:
            k = min(k, int(memory[n] // need.memory))
        return k

    if need.pods == 1:  # the common case: one scan for the fullest node with room
        best = -1
        for n, g in enumerate(gpus):
            if g >= need.gpus and (best < 0 or g < gpus[best]) and room(n) > 0:
                best = n
        return [(best, 1)] if best >= 0 else None
    left, out = need.pods, []
    for n in sorted(range(len(gpus)), key=lambda n: (gpus[n], n)):
        if gpus[n] < need.gpus or (k := room(n)) <= 0:
            continue
        take = min(k, left)
        out.append((n, take))
        left -= take
        if left == 0:
            return out
    return None


class _Cluster:
    """The nodes' capacity and what is free of it."""

    def __init__(self, policy: ReplayPolicy) -> None:
        nodes = policy.node_list()
        self.gpus = [float(n.gpus) for n in nodes]
        self.cpu = [n.cpu * 1000 if n.cpu is not None else math.inf for n in nodes]
        self.memory = [n.memory_gib * 1024 * _MIB if n.memory_gib is not None else math.inf for n in nodes]
        self.free_gpus = list(self.gpus)
        self.free_cpu = list(self.cpu)
        self.free_memory = list(self.memory)
        self.capacity = sum(n.gpus for n in nodes)
        self.total_free = self.capacity

    def placement(self, need: _Need) -> list[tuple[int, int]] | None:
        return _fit(need, self.free_gpus, self.free_cpu, self.free_memory)

    def take(self, need: _Need, where: Sequence[tuple[int, int]], sign: int = 1) -> None:
        for n, pods in where:
            self.free_gpus[n] -= sign * pods * need.gpus
            self.free_cpu[n] -= sign * pods * need.cpu
            self.free_memory[n] -= sign * pods * need.memory
            self.total_free -= sign * pods * need.gpus

    def never_fits(self, need: _Need) -> str | None:
        """Return why a job could not run even on the empty cluster, or None."""
        one = _Need(1, need.gpus, need.cpu, need.memory)
        if _fit(one, self.gpus, self.cpu, self.memory) is None:
            what = f"{need.gpus} GPUs"
            if need.cpu or need.memory:
                what += f", {need.cpu / 1000:g} CPUs and {need.memory / 2**30:g} GiB"
            largest = max(self.gpus, default=0)
            return f"a pod asks {what}; no node has that much (the largest has {largest:g} GPUs)"
        if _fit(need, self.gpus, self.cpu, self.memory) is None:
            return f"its {need.pods} pods of {need.gpus} GPUs do not fit on the whole cluster ({self.capacity} GPUs)"
        return None


def replay(jobs: Sequence[TraceJob], policy: ReplayPolicy, *, prune: bool = True) -> Replay:
    """Return what becomes of `jobs` under `policy` (see the module's docstring for the model). `prune`: pass
    over the pending jobs a scheduling pass has shown cannot start (off: try each one, the same result slower;
    the tests compare the two)."""
    return _Run(jobs, policy, prune).run()


class _Run:
    def __init__(self, jobs: Sequence[TraceJob], policy: ReplayPolicy, prune: bool = True) -> None:
        self.jobs = jobs
        self.prune = prune
        self.policy = policy
        self.cluster = _Cluster(policy)
        self.grace = policy.termination_grace
        self.resume = policy.restart.mode == "resume"
        self.checkpoint = policy.restart.checkpoint_every
        n = len(jobs)
        self.need = [
            _Need(
                j.pods, j.gpus_per_pod, float(j.cpu_millis_per_pod or 0), float(j.memory_bytes_per_pod or 0)
            )
            for j in jobs
        ]
        shapes: dict[_Need, int] = {}
        self.kind = [
            (shapes.setdefault(need, len(shapes)), j.tier) for need, j in zip(self.need, jobs, strict=True)
        ]
        self.needs = list(shapes)  # shape id -> need
        self.waiting: dict[tuple[int, str], int] = {}  # kind -> jobs of that kind pending
        self.state = [_PENDING] * n
        self.remaining = [j.duration for j in jobs]
        self.queued_at = [j.submitted for j in jobs]
        self.waited = [0.0] * n
        self.first_start: list[float | None] = [None] * n
        self.finished: list[float | None] = [None] * n
        self.run_start = [0.0] * n
        self.preempted = [0] * n
        self.lost = [0.0] * n  # GPU-seconds
        self.held = [0.0] * n  # GPU-seconds
        self.where: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.token = [0] * n  # a finish event counts only if the run it was made for is still the job's run
        self.refused: list[str | None] = [None] * n
        self.victims_of: dict[int, list[int]] = {}
        self.pending: list[tuple[int, float, int]] = []  # (-priority, queued at, index), kept sorted
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, job, token)
        self.seq = 0
        self.running: set[int] = set()  # running and preemptible
        self.team_used: dict[str, int] = {}
        self.quota = dict(policy.quotas)
        self.queue_of: dict[str, str] = {t: q.name for q in policy.cluster_queues for t in q.teams}
        self.nominal = {q.name: q.nominal_gpus for q in policy.cluster_queues}
        self.borrow = {
            q.name: (q.borrowing_limit if q.borrowing_limit is not None else math.inf)
            for q in policy.cluster_queues
        }
        self.cohort_nominal = sum(self.nominal.values())
        self.queue_used = dict.fromkeys(self.nominal, 0)
        self.quotas_apply = bool(self.quota or self.queue_of)
        self.rules = {t.name: policy.may_preempt(t.name) for t in policy.tiers}
        self.now = jobs[0].submitted if jobs else 0.0
        self.start = self.now
        self.busy = 0.0

    # --- the event loop -------------------------------------------------------------------------------------

    def run(self) -> Replay:
        for i, j in enumerate(self.jobs):
            if reason := self._refusal(i):
                self.refused[i], self.state[i] = reason, _REFUSED
            else:
                self._push(j.submitted, _ARRIVAL, i)
        while self.events:
            t = self.events[0][0]
            self.now = t
            freed, arrived = False, []
            while self.events and self.events[0][0] == t:
                _, kind, _, i, token = heapq.heappop(self.events)
                if kind == _ARRIVAL:
                    arrived.append(i)
                elif kind == _FINISH:
                    if token == self.token[i] and self.state[i] == _RUNNING:
                        self._finish(i)
                        freed = True
                else:
                    self._grace_ends(i)
                    freed = True
            if freed:
                for i in arrived:
                    self._enqueue(i)
                self._schedule()
            else:
                for i in arrived:
                    if not self._try(i):
                        self._enqueue(i)
        for i in range(len(self.jobs)):
            if self.state[i] == _PENDING:  # never started (quota or a queue kept it out to the end)
                self.waited[i] += self.now - self.queued_at[i]
        return self._result()

    def _push(self, t: float, kind: int, i: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (t, kind, self.seq, i, self.token[i]))

    def _schedule(self) -> None:
        """Try every pending job in order; stop early once nothing is free and no one left may preempt, or
        once every kind of job still pending has failed in this pass."""
        # The queue is not copied (it may hold a backlog of many thousands): the jobs that start are deleted
        # from it afterwards. Nothing joins it during a pass: victims rejoin when their grace ends.
        pending = self.pending
        started: list[int] = []
        lowest: float | None = None  # the lowest running priority, found when first needed
        # Kinds (shape, tier) known to fail in this pass: a job asking at least as much in every way as one
        # that neither fit nor found victims, with no more victims open to it, fails too. Later jobs have no
        # higher a priority, so a failed job whose rule is "lower" (any lower priority) rules out every tier's
        # kinds it covers; one with a narrower rule only its own tier's.
        dead: set[tuple[int, str]] = set()
        for k, entry in enumerate(pending):
            if self.cluster.total_free <= 0:
                # Preemptions in this pass only raise the lowest running priority: this bound stays safe.
                if lowest is None:
                    lowest = min((self.jobs[v].priority for v in self.running), default=math.inf)
                if -entry[0] <= lowest:
                    break
            i = entry[2]
            kind = self.kind[i]
            if kind in dead or not self._admitted(i):
                continue
            if self._place(i):
                self._left_queue(kind)
                started.append(k)
                continue
            if not self.prune:
                continue
            need, every_tier = self.needs[kind[0]], self.rules.get(kind[1], "lower") == "lower"
            for other in self.waiting:
                if (
                    other not in dead
                    and (every_tier or other[1] == kind[1])
                    and _covers(need, self.needs[other[0]])
                ):
                    dead.add(other)
            if len(dead) >= len(self.waiting):  # every kind still pending fails: the rest wait
                break
        for k in reversed(started):
            del pending[k]

    def _enqueue(self, i: int) -> None:
        bisect.insort(self.pending, (-self.jobs[i].priority, self.queued_at[i], i))
        self.waiting[self.kind[i]] = self.waiting.get(self.kind[i], 0) + 1

    def _left_queue(self, kind: tuple[int, str]) -> None:
        if self.waiting[kind] == 1:
            del self.waiting[kind]
        else:
            self.waiting[kind] -= 1

    # --- one job --------------------------------------------------------------------------------------------

    def _try(self, i: int) -> bool:
        """Start job i, or reserve its place by preempting; False when it stays pending."""
        return self._admitted(i) and self._place(i)

    def _place(self, i: int) -> bool:
        need = self.need[i]
        if need.pods * need.gpus <= self.cluster.total_free:
            where = self.cluster.placement(need)
            if where is not None:
                self._charge(i, 1)
                self.cluster.take(need, where)
                self.where[i] = where
                self._start(i)
                return True
        return self._preempt_for(i)

    def _admitted(self, i: int) -> bool:
        if not self.quotas_apply:
            return True
        j = self.jobs[i]
        g = j.gpus
        if j.team in self.quota and self.team_used.get(j.team, 0) + g > self.quota[j.team]:
            return False
        q = self.queue_of.get(j.team)
        if q is None:
            return True
        used = self.queue_used[q] + g
        if used <= self.nominal[q]:
            return True
        return (
            used - self.nominal[q] <= self.borrow[q]
            and sum(self.queue_used.values()) + g <= self.cohort_nominal
        )

    def _charge(self, i: int, sign: int) -> None:
        if not self.quotas_apply:
            return
        j = self.jobs[i]
        self.team_used[j.team] = self.team_used.get(j.team, 0) + sign * j.gpus
        if (q := self.queue_of.get(j.team)) is not None:
            self.queue_used[q] += sign * j.gpus

    def _start(self, i: int) -> None:
        self.waited[i] += self.now - self.queued_at[i]
        if self.first_start[i] is None:
            self.first_start[i] = self.now
        self.state[i] = _RUNNING
        self.run_start[i] = self.now
        self.token[i] += 1
        if self.jobs[i].preemptible:
            self.running.add(i)
        self._push(self.now + self.remaining[i], _FINISH, i)

    def _finish(self, i: int) -> None:
        self.state[i] = _DONE
        self.finished[i] = self.now
        self.running.discard(i)
        self._release(i, self.now)

    def _release(self, i: int, until: float) -> None:
        need = self.need[i]
        self.cluster.take(need, self.where[i], -1)
        self.held[i] += need.pods * need.gpus * (until - self.run_start[i])
        self.where[i] = []
        self._charge(i, -1)

    def _victims(self, i: int) -> list[int]:
        j = self.jobs[i]
        rule = self.rules.get(j.tier, "lower")
        if rule == "never":
            return []
        allowed = None if rule == "lower" else set(rule)
        out = [
            v
            for v in self.running
            if self.jobs[v].priority < j.priority and (allowed is None or self.jobs[v].tier in allowed)
        ]
        out.sort(key=lambda v: (self.jobs[v].priority, -self.run_start[v], v))
        return out

    def _preempt_for(self, i: int) -> bool:
        need = self.need[i]
        candidates = self._victims(i)
        if not candidates:
            return False
        total = need.pods * need.gpus
        if self.cluster.total_free + sum(self.jobs[v].gpus for v in candidates) < total:
            return False
        c = self.cluster
        gpus, cpu, memory = list(c.free_gpus), list(c.free_cpu), list(c.free_memory)
        chosen: list[int] = []
        freed = c.total_free

        def give(v: int, sign: int) -> None:
            nv = self.need[v]
            for n, pods in self.where[v]:
                gpus[n] += sign * pods * nv.gpus
                cpu[n] += sign * pods * nv.cpu
                memory[n] += sign * pods * nv.memory

        where = None
        for v in candidates:
            give(v, 1)
            chosen.append(v)
            freed += self.jobs[v].gpus
            if freed >= total and (where := _fit(need, gpus, cpu, memory)) is not None:
                break
        else:
            return False
        # Spare every victim the preemptor does not need, the highest priority first.
        for v in reversed(chosen[:-1]):
            give(v, -1)
            if (w := _fit(need, gpus, cpu, memory)) is not None:
                chosen.remove(v)
                where = w
            else:
                give(v, 1)
        assert where is not None
        for v in chosen:
            self._stop(v)
        self._charge(i, 1)
        self.cluster.take(need, where)
        self.where[i] = where
        self.state[i] = _RESERVED
        self.victims_of[i] = chosen
        self._push(self.now + self.grace, _GRACE_END, i)
        return True

    def _stop(self, v: int) -> None:
        """Preempt v now: it keeps its GPUs (for the books) until the grace ends, its place goes to the preemptor."""
        self.state[v] = _TERMINATING
        self.running.discard(v)
        self.token[v] += 1  # its finish event no longer counts
        self.preempted[v] += 1
        done = self.now - self.run_start[v]
        if self.resume:
            kept = done
        elif self.checkpoint:
            kept = math.floor(done / self.checkpoint) * self.checkpoint
        else:
            kept = 0.0
        self.remaining[v] -= kept
        self.lost[v] += (done - kept) * self.jobs[v].gpus
        need = self.need[v]
        self.cluster.take(need, self.where[v], -1)
        self.held[v] += need.pods * need.gpus * (self.now + self.grace - self.run_start[v])
        self.where[v] = []
        self._charge(v, -1)

    def _grace_ends(self, i: int) -> None:
        for v in self.victims_of.pop(i):
            self.state[v] = _PENDING
            self.queued_at[v] = self.now
            self._enqueue(v)
        self._start(i)

    def _refusal(self, i: int) -> str | None:
        j = self.jobs[i]
        if reason := self.cluster.never_fits(self.need[i]):
            return reason
        if j.team in self.quota and j.gpus > self.quota[j.team]:
            return f"it asks {j.gpus} GPUs; team {j.team}'s quota is {self.quota[j.team]}"
        if (q := self.queue_of.get(j.team)) is not None:
            most = min(self.nominal[q] + self.borrow[q], self.cohort_nominal)
            if j.gpus > most:
                return f"it asks {j.gpus} GPUs; ClusterQueue {q} may hold at most {most:g}"
        return None

    def _result(self) -> Replay:
        end = self.now
        out = []
        for i, j in enumerate(self.jobs):
            held = self.held[i]
            if self.state[i] == _RUNNING:  # cannot happen once every event ran; kept for a future horizon
                held += j.gpus * (end - self.run_start[i])
            self.busy += held
            out.append(
                JobOutcome(
                    id=j.id,
                    team=j.team,
                    tier=j.tier,
                    priority=j.priority,
                    gpus=j.gpus,
                    submitted=j.submitted,
                    started=self.first_start[i],
                    finished=self.finished[i],
                    waited=self.waited[i],
                    preemptions=self.preempted[i],
                    gpu_hours_lost=self.lost[i] / 3600.0,
                    gpu_hours=held / 3600.0,
                    refused=self.refused[i],
                )
            )
        return Replay(
            policy=self.policy.name,
            jobs=tuple(out),
            capacity_gpus=self.cluster.capacity,
            start=self.start,
            end=end,
            busy_gpu_seconds=self.busy,
        )
