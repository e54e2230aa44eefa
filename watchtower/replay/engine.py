"""The replay engine: a trace's jobs run through a policy, event by event (arrivals, finishes, ends of a
termination grace), never stepped through time, so a week takes as long as its events do.

The model, in kube-scheduler's terms (docs/replay.md says more):
- Pending jobs are tried in priority order, then by the time they (re)joined the queue; a job that does not fit
  is passed over and the next one is tried (no head-of-line blocking, as kube-scheduler does).
- A job is placed whole: every pod at once or none (a gang), each pod on one node with room for its GPUs (and
  its CPU and memory, where both the job and the node say), filling the fullest node that fits first so that
  whole nodes stay free for large pods (`scoring: LeastAllocated`: the emptiest, as kube-scheduler's default
  profile spreads). A job with `gang_min` below its pods starts once that many fit, with
  every pod that fits then, and runs its whole duration on those (as Kueue's partial admission does: the pods
  left out are never added later); a preemption or a reclaim for it frees room for `gang_min` pods.
- A team's quota is charged from a job's admission to its end, pending or running, as a ResourceQuota charges
  a pod from its creation: the team's jobs are admitted in arrival order as the quota has room, the others
  passed over until it has. A ClusterQueue is charged for what its jobs hold, its nominal quota and
  borrowing limit checked before the nodes: a job over quota waits. A queue within its nominal quota still waits when the cohort's quota is all in use (others borrowed it), unless its
  `reclaimWithinCohort` lets it preempt jobs of the queues that are borrowing (Kueue's reclaim: `Any`, or
  `LowerPriority` for jobs of a lower priority only), most recently started and lowest priority first, only
  while their queue stays above its nominal quota.
- A job that fits nowhere may preempt running jobs of a strictly lower priority that its tier's rule allows
  and that are preemptible: the lowest priorities first, the most recently started first among equals, then
  every victim whose removal is not needed is spared. The victims hold their GPUs for the termination grace;
  the preemptor's place is reserved at once and it starts when the grace ends.
- A victim rejoins the queue when its grace ends. Under `restart` it keeps the work up to its last checkpoint
  (none without `checkpoint_every`); under `resume` it keeps all of it. The work lost is counted in GPU-hours.
- A job that could never run (larger than any node or the whole cluster, or than its quota) is refused with
  the reason, and takes no part in the run.
- Under `quota_retry` a job its quota refused is tried again only when its controller's backoff says
  (the freed room goes to whoever asks first), its pods charged one at a time under `per_pod`. A job the
  trace says was `deleted` before it started leaves the queue and its quota then; a victim with a `grace`
  of its own holds its GPUs that long. Under `quota_retry.give_up_after` people delete a job its quota
  refused that long; a job without a `controller` (bare pods) its quota refuses on arrival is turned away.
- Under `gangs: declared` a job without a `gang_min` has its pods placed one by one as each fits, each
  holding its node idle until the last is placed (a pending job's placed pods are victims as any bound
  pod's); preempted, it loses only its pods on the preemptor's nodes. A preemptor waiting for its victims
  starts wherever room frees first, their place staying taken until they are gone.
The engine draws no random numbers: the same trace under the same policy gives the same result.

Size: over 400 lines because placement, quota, preemption and the event heap share one mutable picture
of the cluster (free GPUs per node, held quota, the running set); split apart, each would reach into the
others' state on every event, where the replay's speed is spent.
"""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from .policy import ReplayPolicy
from .trace import TraceJob

# At one instant: capacity freed before new work arrives.
_FINISH, _GRACE_END, _DELETE, _RETRY, _ARRIVAL, _GIVE_UP = 0, 1, 2, 3, 4, 5
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
    deleted: float | None = (
        None  # when it left the queue unstarted (the trace's `deleted`, or people gave up)
    )


def as_observed(j: TraceJob, started: float) -> JobOutcome:
    """Return a job of the trace as it ran: waiting from submission to its observed start, then running its
    duration, never preempted (the trace says when it started, not what happened on the way)."""
    return JobOutcome(
        id=j.id,
        team=j.team,
        tier=j.tier,
        priority=j.priority,
        gpus=j.gpus,
        submitted=j.submitted,
        started=started,
        finished=started + j.duration,
        waited=started - j.submitted,
        preemptions=0,
        gpu_hours_lost=0.0,
        gpu_hours=j.gpus * j.duration / 3600.0,
    )


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
    least: int = 0  # fewest pods it may start with (a gang's minimum); 0: all of them
    loose: bool = False  # its pods placed one by one as each fits (no gang: policy `gangs: declared`)

    @property
    def fewest(self) -> int:
        return self.least or self.pods

    def capped(self, pods: int) -> _Need:
        """Return this need with at most `pods` pods (a quota's room), keeping its minimum."""
        return (
            self
            if pods >= self.pods
            else _Need(pods, self.gpus, self.cpu, self.memory, self.fewest, self.loose)
        )

    def pod(self) -> _Need:
        """Return one of its pods, placed alone."""
        return _Need(1, self.gpus, self.cpu, self.memory)


def _covers(failed: _Need, need: _Need) -> bool:
    """Return whether `need` asks at least as much as `failed` in every way, so it cannot fit where `failed`
    did not. A job placed pod by pod may place a pod where a gang did not fit."""
    if need.loose and not failed.loose:
        return False
    return (
        need.pods >= failed.pods
        and need.fewest >= failed.fewest
        and need.gpus >= failed.gpus
        and need.cpu >= failed.cpu
        and need.memory >= failed.memory
    )


def _fit(
    need: _Need,
    gpus: Sequence[float],
    cpu: Sequence[float],
    memory: Sequence[float],
    spread: bool = False,
) -> list[tuple[int, int]] | None:
    """Return [(node, pods)] placing the pods of `need` on nodes with these free amounts, the fullest node
    that fits first (`spread`: the emptiest, as kube-scheduler's LeastAllocated): all of them, or as many as
    fit when at least its minimum does; None otherwise."""

    def room(n: int) -> int:
        k = int(gpus[n] // need.gpus) if need.gpus else need.pods
        if need.cpu:
            k = min(k, int(cpu[n] // need.cpu))
        if need.memory:
            k = min(k, int(memory[n] // need.memory))
        return k

    if need.pods == 1:  # the common case: one scan for the fullest (or emptiest) node with room
        best = -1
        for n, g in enumerate(gpus):
            if (
                g >= need.gpus
                and (best < 0 or (g > gpus[best] if spread else g < gpus[best]))
                and room(n) > 0
            ):
                best = n
        return [(best, 1)] if best >= 0 else None
    left, out = need.pods, []
    order = (lambda n: (-gpus[n], n)) if spread else (lambda n: (gpus[n], n))
    for n in sorted(range(len(gpus)), key=order):
        if gpus[n] < need.gpus or (k := room(n)) <= 0:
            continue
        take = min(k, left)
        out.append((n, take))
        left -= take
        if left == 0:
            return out
    return out if need.pods - left >= need.fewest else None


class _Cluster:
    """The nodes' capacity and what is free of it."""

    def __init__(self, policy: ReplayPolicy) -> None:
        nodes = policy.node_list()
        self.spread = policy.scoring == "LeastAllocated"
        self.gpus = [float(n.gpus) for n in nodes]
        self.cpu = [n.cpu * 1000 if n.cpu is not None else math.inf for n in nodes]
        self.memory = [n.memory_gib * 1024 * _MIB if n.memory_gib is not None else math.inf for n in nodes]
        self.free_gpus = list(self.gpus)
        self.free_cpu = list(self.cpu)
        self.free_memory = list(self.memory)
        self.capacity = sum(n.gpus for n in nodes)
        self.total_free = self.capacity

    def placement(self, need: _Need) -> list[tuple[int, int]] | None:
        return _fit(need, self.free_gpus, self.free_cpu, self.free_memory, self.spread)

    def take(self, need: _Need, where: Sequence[tuple[int, int]], sign: int = 1) -> None:
        for n, pods in where:
            self.free_gpus[n] -= sign * pods * need.gpus
            self.free_cpu[n] -= sign * pods * need.cpu
            self.free_memory[n] -= sign * pods * need.memory
            self.total_free -= sign * pods * need.gpus

    def never_fits(self, need: _Need) -> str | None:
        """Return why a job could not run even on the empty cluster, or None."""
        one = _Need(1, need.gpus, need.cpu, need.memory)
        need = _Need(need.fewest, need.gpus, need.cpu, need.memory)  # a partial gang may run on its minimum
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
        # Each job's own time to stop when preempted (its trace's `grace`), else the policy's.
        self.grace = [j.grace if j.grace is not None else policy.termination_grace for j in jobs]
        self.resume = policy.restart.mode == "resume"
        self.checkpoint = policy.restart.checkpoint_every
        n = len(jobs)
        self.need = [
            _Need(
                j.pods,
                j.gpus_per_pod,
                float(j.cpu_millis_per_pod or 0),
                float(j.memory_bytes_per_pod or 0),
                j.gang_min if j.gang_min is not None and j.gang_min < j.pods else 0,
                policy.gangs == "declared" and j.gang_min is None and j.pods > 1,
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
        self.since = [0.0] * n  # when what it holds last changed (held counts up to then)
        self.where: list[list[tuple[int, int]]] = [[] for _ in range(n)]
        self.size = [0] * n  # GPUs it holds now: a partial gang holds fewer than it asks
        self.placed = [0] * n  # pods it holds now (a job placed pod by pod holds some while it waits)
        self.reserved = [0] * n  # GPUs of what it holds that its victims still stop on
        self.reserving: set[int] = set()  # jobs waiting for their victims to stop
        # A preemption whose preemptor went elsewhere while its victims stopped: the place they leave, taken
        # until they are gone.
        self.blocked: dict[int, list[tuple[int, int]]] = {}
        self.token = [0] * n  # a finish event counts only if the run it was made for is still the job's run
        self.refused: list[str | None] = [None] * n
        self.deleted: list[float | None] = [None] * n
        self.victims_of: dict[int, list[int]] = {}  # a preemption (its event's token) -> its victims
        self.preemption = [0] * n  # the preemption job i waits on (its token), while reserved
        self.pending: list[tuple[int, float, int]] = []  # (-priority, queued at, index), kept sorted
        self.events: list[tuple[float, int, int, int, int]] = []  # (time, kind, seq, job, token)
        self.seq = 0
        self.running: set[int] = set()  # running and preemptible
        # Pending and preemptible, holding some of its pods placed one by one: as bound pods, they are victims.
        self.partial: set[int] = set()
        self.team_used: dict[str, int] = {}  # GPUs of the jobs its quota admitted, pending or running
        self.quota_held = [0] * n  # GPUs job i's team quota charges for it, from admission to its end
        self.unadmitted: dict[str, list[int]] = {}  # team -> its jobs waiting for quota, in arrival order
        self.quota = dict(policy.quotas)
        self.queue_of: dict[str, str] = {t: q.name for q in policy.cluster_queues for t in q.teams}
        self.nominal = {q.name: q.nominal_gpus for q in policy.cluster_queues}
        self.borrow = {
            q.name: (q.borrowing_limit if q.borrowing_limit is not None else math.inf)
            for q in policy.cluster_queues
        }
        self.cohort_nominal = sum(self.nominal.values())
        self.queue_used = dict.fromkeys(self.nominal, 0)
        self.reclaim = {q.name: q.preemption.reclaim_within_cohort for q in policy.cluster_queues}
        self.reclaim_any = "Any" in self.reclaim.values()
        self.reclaiming = any(r != "Never" for r in self.reclaim.values())
        self.quotas_apply = bool(self.quota or self.queue_of)
        retry = policy.quota_retry
        self.retry = (retry.initial, retry.max) if retry is not None else None
        self.backoff = [retry.initial if retry is not None else 0.0] * n
        self.next_try = [0.0] * n  # when its controller next tries the pods its quota refused
        self.give_up = retry.give_up_after if retry is not None else None
        self.refused_since: list[float | None] = [None] * n  # refused by its quota since, no pod made
        self.per_pod = retry is not None and retry.per_pod
        self.live = 0  # events in the heap other than quota retries
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
                if j.deleted is not None:
                    self._push(max(j.deleted, j.submitted), _DELETE, i)
        while self.events:
            if self.live == 0 and not any(self._fits_quota(e[3]) for e in self.events):
                break  # only quota retries left, none with room: nothing will ever free what they wait for
            t = self.events[0][0]
            self.now = t
            freed, arrived, retried = False, [], set()
            while self.events and self.events[0][0] == t:
                _, kind, _, i, token = heapq.heappop(self.events)
                if kind != _RETRY:
                    self.live -= 1
                if kind == _ARRIVAL:
                    arrived.append(i)
                elif kind == _RETRY:
                    retried.add(self.jobs[i].team)
                elif kind == _DELETE:
                    freed |= self._delete(i)
                elif kind == _GIVE_UP:
                    # Its owner deletes it only if its quota has refused it all that time.
                    since = self.refused_since[i]
                    if since is not None and self.give_up is not None and t - since >= self.give_up:
                        freed |= self._delete(i)
                elif kind == _FINISH:
                    if token == self.token[i] and self.state[i] == _RUNNING:
                        self._finish(i)
                        freed = True
                else:
                    self._grace_ends(i, token)
                    freed = True
            arrived = [i for i in arrived if self.state[i] == _PENDING]  # not deleted on arrival
            for i in arrived:
                if (team := self.jobs[i].team) in self.quota:
                    self.unadmitted.setdefault(team, []).append(i)
                    self._admit(team)
                    if (
                        not self.jobs[i].controller
                        and self.quota_held[i] < self.need[i].gpus * self.need[i].pods
                    ):
                        # A bare pod its quota refuses is never made (the API server's error is final):
                        # it leaves at once, with what it was charged.
                        self._delete(i)
            for team in retried:
                freed |= self._admit(team)  # quota now held: the pending jobs are tried again
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

    def _push(self, t: float, kind: int, i: int, token: int | None = None) -> None:
        self.seq += 1
        if kind != _RETRY:
            self.live += 1
        heapq.heappush(self.events, (t, kind, self.seq, i, self.token[i] if token is None else token))

    def _schedule(self) -> None:
        """Try every pending job in order; stop early once nothing is free and no one left may preempt, or
        once every kind of job still pending has failed in this pass."""
        # The queue is not copied (it may hold a backlog of many thousands): the jobs that start are deleted
        # from it afterwards. Nothing joins it during a pass: victims rejoin when their grace ends.
        for i in sorted(self.reserving, key=lambda i: (-self.jobs[i].priority, self.queued_at[i], i)):
            self._elsewhere(i)
        pending = self.pending
        started: list[int] = []
        lowest: float | None = None  # the lowest running priority, found when first needed
        # Kinds (shape, tier) known to fail in this pass: a job asking at least as much in every way as one
        # that neither fit nor found victims, with no more victims open to it, fails too. Later jobs have no
        # higher a priority, so a failed job whose rule is "lower" (any lower priority) rules out every tier's
        # kinds it covers; one with a narrower rule only its own tier's.
        dead: set[tuple[int, str]] = set()
        for k, entry in enumerate(pending):
            if self.cluster.total_free <= 0 and not self.reclaim_any:
                # Preemptions in this pass only raise the lowest running priority: this bound stays safe
                # (a reclaim under `Any` may take a job of any priority: then it does not hold).
                if lowest is None:
                    lowest = min(
                        (self.jobs[v].priority for v in (*self.running, *self.partial)), default=math.inf
                    )
                if -entry[0] <= lowest:
                    break
            i = entry[2]
            kind = self.kind[i]
            if kind in dead:
                continue
            if self._try(i):
                self._left_queue(kind)
                started.append(k)
                continue
            if self._room(i) < self.need[i].fewest:  # held back by a quota: says nothing of the nodes
                continue
            if not self.prune or self.reclaiming:
                # Where queues reclaim, a job's victims hang on its queue, and a reclaim may free GPUs no
                # failed job could take: a failure rules nothing else out.
                continue
            need, every_tier = self.needs[kind[0]], self.rules.get(kind[1], "lower") == "lower"
            for other in self.waiting:
                if (
                    other not in dead
                    and (every_tier or other[1] == kind[1])
                    and _covers(need, self.needs[other[0]])
                ):
                    dead.add(other)
            if len(dead) >= len(self.waiting) and not self.reclaiming:
                break  # every kind still pending fails: the rest wait (a reclaim would not, by its queue)
        for k in reversed(started):
            del pending[k]

    def _elsewhere(self, i: int) -> None:
        """A job waiting for its victims to stop starts now on room freed meanwhile, as kube-scheduler binds a
        nominated pod wherever it fits first; its victims stop all the same (their place stays taken until
        they are gone)."""
        if self.reserved[i] != self.size[i]:
            return  # a job placed pod by pod that holds pods of its own: it waits where it is
        need = self.need[i]
        want = _Need(self.placed[i], need.gpus, need.cpu, need.memory)
        if want.pods * want.gpus > self.cluster.total_free:
            return
        where = self.cluster.placement(want)
        if where is None:
            return
        self.cluster.take(need, where)
        self.blocked[self.preemption[i]] = self.where[i]
        self.where[i] = where
        self.reserving.discard(i)
        self.reserved[i] = 0
        self.since[i] = self.now
        self._start(i)

    def _dequeue(self, i: int) -> bool:
        """Take job i out of the pending queue; False when it was not in it."""
        entry = (-self.jobs[i].priority, self.queued_at[i], i)
        k = bisect.bisect_left(self.pending, entry)
        if k < len(self.pending) and self.pending[k] == entry:
            del self.pending[k]
            return True
        return False

    def _enqueue(self, i: int) -> None:
        bisect.insort(self.pending, (-self.jobs[i].priority, self.queued_at[i], i))
        self.waiting[self.kind[i]] = self.waiting.get(self.kind[i], 0) + 1

    def _left_queue(self, kind: tuple[int, str]) -> None:
        if self.waiting[kind] == 1:
            del self.waiting[kind]
        else:
            self.waiting[kind] -= 1

    # --- one job --------------------------------------------------------------------------------------------

    def _admit(self, team: str) -> bool:
        """Charge the team's quota for each of its waiting jobs it has room for, in arrival order, passing over
        those it has not: a ResourceQuota charges a pod from its creation, pending or not, and the
        controllers retry the pods it refused, whichever fits first. Under `quota_retry` only the jobs
        whose retry is due are tried, pod by pod. Return whether a job's quota grew."""
        waiting = self.unadmitted.get(team)
        if not waiting:
            return False
        if self.retry is not None:
            return self._admit_pods(team, waiting)
        kept = []
        for i in waiting:
            need = self.need[i]
            room = (self.quota[team] - self.team_used.get(team, 0)) // need.gpus
            if room >= need.fewest:
                self.quota_held[i] = min(need.pods, room) * need.gpus
                self.team_used[team] = self.team_used.get(team, 0) + self.quota_held[i]
            else:
                kept.append(i)
        self.unadmitted[team] = kept
        return False

    def _admit_pods(self, team: str, waiting: list[int]) -> bool:
        """A controller's view of a quota: each job whose retry is due is charged when the quota has room
        for it, or tried again after its backoff, which doubles from `quota_retry.initial` to its `max`, as
        the Job and ReplicaSet controllers requeue a failed sync; the room freed meanwhile goes to whoever
        asks first (a new job). A job is charged whole (its pods at once): charged pod by pod, jobs
        holding part of a quota each could wait for one another for ever."""
        assert self.retry is not None
        most = self.retry[1]
        kept, grew = [], False
        for i in waiting:
            if self.next_try[i] > self.now:
                kept.append(i)
                continue
            need = self.need[i]
            room = max(0, (self.quota[team] - self.team_used.get(team, 0)) // need.gpus)
            have = self.quota_held[i] // need.gpus
            if self.per_pod and 0 < room < need.fewest - have:
                # The controller makes the pods it can, one at a time, each charged as it is made.
                self.quota_held[i] += room * need.gpus
                self.team_used[team] = self.team_used.get(team, 0) + room * need.gpus
                self.backoff[i] = self.retry[0]
                self.refused_since[i] = None
                have += room
                grew |= need.loose  # a pod placed alone may go to its node now
                room = 0
            if have + room >= need.fewest:
                made = min(need.pods - have, room)
                self.quota_held[i] += made * need.gpus
                self.team_used[team] = self.team_used.get(team, 0) + made * need.gpus
                self.refused_since[i] = None
                grew = True
            else:
                if self.refused_since[i] is None:
                    self.refused_since[i] = self.now
                    if self.give_up is not None:
                        self._push(self.now + self.give_up, _GIVE_UP, i)
                self.next_try[i] = self.now + self.backoff[i]
                self.backoff[i] = min(most, self.backoff[i] * 2)
                self._push(self.next_try[i], _RETRY, i)
                kept.append(i)
        self.unadmitted[team] = kept
        return grew

    def _fits_quota(self, i: int) -> bool:
        """Return whether job i's team quota has room now for the rest of its minimum."""
        need, team = self.need[i], self.jobs[i].team
        room = (self.quota[team] - self.team_used.get(team, 0)) // need.gpus
        return self.quota_held[i] // need.gpus + room >= need.fewest

    def _delete(self, i: int) -> bool:
        """Job i deleted (the trace's `deleted`): one that never started leaves the queue and gives back
        its quota; one that started keeps running (its record says how it ended). Return whether quota
        was freed."""
        if self.state[i] != _PENDING or self.first_start[i] is not None:
            return False
        self.state[i] = _DONE
        self.deleted[i] = self.now
        self.waited[i] += self.now - self.queued_at[i]
        if self._dequeue(i):
            self._left_queue(self.kind[i])
        team = self.jobs[i].team
        if i in self.unadmitted.get(team, ()):
            self.unadmitted[team].remove(i)
        placed = bool(self.where[i])
        if placed:  # pods placed one by one, waiting for their siblings
            self._release(i)
        if not self.quota_held[i]:
            return placed
        self.team_used[team] -= self.quota_held[i]
        self.quota_held[i] = 0
        self._admit(team)
        return True

    def _try(self, i: int) -> bool:
        """Start job i, or reserve its place by preempting or reclaiming; False when it stays pending."""
        need = self.need[i]
        room = self._room(i)
        if need.loose:
            return self._try_pods(i, room)
        if room >= need.fewest:
            return self._place(i, need.capped(room))
        return self._reclaim(i)

    def _try_pods(self, i: int, room: int) -> bool:
        """kube-scheduler's turn for each pod of job i, whose pods no gang holds together: each pod its quota
        admits goes where it fits and holds that node's GPUs while it waits for its siblings; the job runs
        once its last pod is placed. When the quota admits every pod left but no node has room, they may
        preempt together (as each would in its turn)."""
        need = self.need[i]
        one = need.pod()
        left = room - self.placed[i]
        while left > 0 and self.cluster.total_free >= need.gpus:
            where = self.cluster.placement(one)
            if where is None:
                break
            self._hold(i, where)
            left -= 1
        if self.placed[i] == need.pods:
            self.partial.discard(i)
            self._start(i)
            return True
        if self.placed[i] and self.jobs[i].preemptible:
            self.partial.add(i)
        if left <= 0 or left < need.pods - self.placed[i]:
            return False  # its quota has not admitted the rest yet
        rest = _Need(left, need.gpus, need.cpu, need.memory)
        return self._preempt_for(i, rest, self._victims(i, rest))

    def _place(self, i: int, need: _Need) -> bool:
        if need.fewest * need.gpus <= self.cluster.total_free:
            where = self.cluster.placement(need)
            if where is not None:
                self._hold(i, where)
                self._start(i)
                return True
        return self._preempt_for(i, need, self._victims(i, need))

    def _hold(self, i: int, where: list[tuple[int, int]]) -> None:
        """Give job i these pods on these nodes: the nodes' room, its GPUs, its team's and queue's quota."""
        need = self.need[i]
        self.cluster.take(need, where)
        self._account(i)
        pods = sum(p for _, p in where)
        self.where[i] = [*self.where[i], *where]
        self.placed[i] += pods
        self.size[i] += pods * need.gpus
        if (q := self.queue_of.get(self.jobs[i].team)) is not None:
            self.queue_used[q] += pods * need.gpus

    def _account(self, i: int) -> None:
        """Count the GPU-seconds job i held since what it holds last changed."""
        self.held[i] += self.size[i] * (self.now - self.since[i])
        self.since[i] = self.now

    def _room(self, i: int) -> int:
        """Return the most pods of job i its team's quota and its ClusterQueue admit now."""
        need = self.need[i]
        if not self.quotas_apply:
            return need.pods
        j = self.jobs[i]
        gpus = math.inf
        if j.team in self.quota:
            gpus = self.quota_held[i]  # what its admission charged (0: not admitted yet)
        if (q := self.queue_of.get(j.team)) is not None:
            # Within its nominal quota or borrowing, a queue takes only what the cohort has unused: what
            # another queue borrowed is in use until it is given back (or reclaimed).
            # What it holds already (a job placed pod by pod) is its own, charged to the queue.
            gpus = min(
                gpus,
                self.nominal[q] + self.borrow[q] - self.queue_used[q] + self.size[i],
                self.cohort_nominal - sum(self.queue_used.values()) + self.size[i],
            )
        return need.pods if gpus == math.inf else min(need.pods, max(0, int(gpus // need.gpus)))

    def _charge(self, i: int, sign: int) -> None:
        """Give back (or charge) job i's ClusterQueue for the GPUs it holds (a team's quota is charged from
        its admission to its end: _admit, _finish)."""
        if (q := self.queue_of.get(self.jobs[i].team)) is not None:
            self.queue_used[q] += sign * self.size[i]

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
        self._release(i)
        if self.quota_held[i]:
            team = self.jobs[i].team
            self.team_used[team] -= self.quota_held[i]
            self.quota_held[i] = 0
            self._admit(team)  # the freed room goes to the jobs due now (the others, when they retry)

    def _release(self, i: int) -> None:
        self.partial.discard(i)
        self._account(i)
        self.cluster.take(self.need[i], self.where[i], -1)
        self._charge(i, -1)
        self.where[i], self.size[i], self.placed[i] = [], 0, 0

    def _victims(self, i: int, need: _Need) -> list[int]:
        j = self.jobs[i]
        rule = self.rules.get(j.tier, "lower")
        if rule == "never":
            return []
        allowed = None if rule == "lower" else set(rule)
        # Where queues reclaim, a job that would borrow preempts no other queue's jobs (Kueue's
        # borrowWithinCohort default, Never): what it took would be reclaimed, and the two would take turns.
        own = None
        q = self.queue_of.get(j.team) if self.reclaiming else None
        if q is not None and self.queue_used[q] + need.fewest * need.gpus > self.nominal[q]:
            own = q
        out = [
            v
            for v in (*self.running, *self.partial)
            if self.jobs[v].priority < j.priority
            and (allowed is None or self.jobs[v].tier in allowed)
            and (own is None or self.queue_of.get(self.jobs[v].team) in (own, None))
        ]
        out.sort(
            key=lambda v: (
                self.jobs[v].priority,
                -(self.run_start[v] if self.state[v] == _RUNNING else self.since[v]),
                v,
            )
        )
        return out

    def _reclaim(self, i: int) -> bool:
        """Kueue's reclaimWithinCohort: job i, held back by the cohort's quota though it fits within its own
        queue's nominal quota, preempts jobs of the queues that are borrowing (of a lower priority under
        `LowerPriority`) until the cohort has room for its minimum; False when it may not or that is not
        enough."""
        j = self.jobs[i]
        q = self.queue_of.get(j.team)
        if q is None or self.reclaim[q] == "Never":
            return False
        need = self.need[i]
        need = _Need(need.fewest, need.gpus, need.cpu, need.memory)
        g = need.pods * need.gpus
        if self.queue_used[q] + g > self.nominal[q]:
            return False  # it would borrow: reclaiming takes back only a queue's own nominal quota
        if j.team in self.quota and self.quota_held[i] < g:
            return False
        if not any(u > self.nominal[o] for o, u in self.queue_used.items() if o != q):
            return False  # no queue borrows: nothing to take back
        lower_only = self.reclaim[q] == "LowerPriority"
        candidates = [
            v
            for v in self.running
            if (qv := self.queue_of.get(self.jobs[v].team)) is not None
            and qv != q
            and self.queue_used[qv] > self.nominal[qv]
            and (not lower_only or self.jobs[v].priority < j.priority)
        ]
        candidates.sort(key=lambda v: (self.jobs[v].priority, -self.run_start[v], v))
        over = sum(self.queue_used.values()) + g - self.cohort_nominal

        def given_back(chosen: Sequence[int]) -> dict[str, int]:
            back: dict[str, int] = {}
            for v in chosen:
                qv = self.queue_of[self.jobs[v].team]
                back[qv] = back.get(qv, 0) + self.size[v]
            return back

        def eligible(chosen: Sequence[int], v: int) -> bool:
            # As Kueue: a queue's job is a victim only while that queue is still borrowing.
            qv = self.queue_of[self.jobs[v].team]
            return self.queue_used[qv] - given_back(chosen).get(qv, 0) > self.nominal[qv]

        def quota_ok(chosen: Sequence[int]) -> bool:
            return sum(given_back(chosen).values()) >= over

        return self._preempt_for(i, need, candidates, quota_ok, eligible)

    def _preempt_for(
        self,
        i: int,
        need: _Need,
        candidates: list[int],
        quota_ok: Callable[[Sequence[int]], bool] | None = None,
        eligible: Callable[[Sequence[int], int], bool] | None = None,
    ) -> bool:
        """Choose victims among `candidates` (in order, each while `eligible`) until `need` fits on the nodes
        and `quota_ok`, spare the ones not needed (the last chosen first), stop them and reserve job i's
        place; False when they are not enough."""
        if not candidates:
            return False
        total = need.fewest * need.gpus
        if self.cluster.total_free + sum(self.size[v] for v in candidates) < total:
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
            if eligible is not None and not eligible(chosen, v):
                continue
            give(v, 1)
            chosen.append(v)
            freed += self.size[v]
            if (
                freed >= total
                and (quota_ok is None or quota_ok(chosen))
                and (where := _fit(need, gpus, cpu, memory, c.spread)) is not None
            ):
                break
        else:
            return False
        # Spare every victim the preemptor does not need, the highest priority first.
        for v in reversed(chosen[:-1]):
            give(v, -1)
            rest = [u for u in chosen if u != v]
            if (quota_ok is None or quota_ok(rest)) and (
                w := _fit(need, gpus, cpu, memory, c.spread)
            ) is not None:
                chosen = rest
                where = w
            else:
                give(v, 1)
        assert where is not None
        nodes = {n for n, _ in where}
        for v in chosen:
            self._stop(v, nodes)
        before = self.size[i]
        self._hold(i, where)
        self.reserved[i] = self.size[i] - before  # its victims hold these for the books until they stop
        self.state[i] = _RESERVED
        self.reserving.add(i)
        self.victims_of[self.seq + 1] = chosen
        self.preemption[i] = self.seq + 1
        # Its nominated place is free once the last victim is gone (kube-scheduler binds it then).
        self._push(self.now + max(self.grace[v] for v in chosen), _GRACE_END, i, self.seq + 1)
        return True

    def _stop(self, v: int, nodes: set[int] | None = None) -> None:
        """Preempt v now: it keeps its GPUs (for the books) until the grace ends, its place goes to the preemptor.
        A job placed pod by pod loses only its pods on `nodes` (the preemptor's): the others stay on their
        nodes, idle, while its controller makes the lost ones again (kube-scheduler preempts pods, not jobs);
        a pending one stays in the queue."""
        loose = nodes is not None and self.need[v].loose
        gone = [(n, k) for n, k in self.where[v] if not loose or n in nodes]  # type: ignore[operator]
        self.preempted[v] += 1
        if v in self.partial:
            self.partial.discard(v)
            self._free(v, gone)
            if self.placed[v]:
                self.partial.add(v)
            return
        self.state[v] = _TERMINATING
        self.running.discard(v)
        self.token[v] += 1  # its finish event no longer counts
        done = self.now - self.run_start[v]
        if self.resume:
            kept = done
        elif self.checkpoint:
            kept = math.floor(done / self.checkpoint) * self.checkpoint
        else:
            kept = 0.0
        self.remaining[v] -= kept
        self.lost[v] += (done - kept) * self.size[v]
        self._free(v, gone)

    def _free(self, v: int, gone: list[tuple[int, int]]) -> None:
        """Take these pods of v off their nodes now, held for the books until its grace ends."""
        need = self.need[v]
        gpus = sum(k for _, k in gone) * need.gpus
        self._account(v)
        self.held[v] += gpus * self.grace[v]
        self.cluster.take(need, gone, -1)
        if (q := self.queue_of.get(self.jobs[v].team)) is not None:
            self.queue_used[q] -= gpus
        left = list(self.where[v])
        for w in gone:
            left.remove(w)
        self.where[v] = left
        self.placed[v] -= gpus // need.gpus
        self.size[v] -= gpus

    def _grace_ends(self, i: int, token: int) -> None:
        for v in self.victims_of.pop(token):
            if self.state[v] != _TERMINATING:
                continue  # pods of a pending job, preempted: the job never left the queue
            self.state[v] = _PENDING
            self.queued_at[v] = self.now
            self._enqueue(v)
            if self.placed[v] and self.jobs[v].preemptible:
                self.partial.add(v)  # its pods left on their nodes, waiting for the ones made again
        if (gone := self.blocked.pop(token, None)) is not None:
            self.cluster.take(self.need[i], gone, -1)  # it started elsewhere: its victims are gone now
            return
        self.reserving.discard(i)
        self.held[i] += (self.size[i] - self.reserved[i]) * (self.now - self.since[i])
        self.since[i], self.reserved[i] = self.now, 0
        self._start(i)

    def _refusal(self, i: int) -> str | None:
        j, need = self.jobs[i], self.need[i]
        if reason := self.cluster.never_fits(need):
            return reason
        g = need.fewest * need.gpus  # a partial gang may run on its minimum
        if j.team in self.quota and g > self.quota[j.team]:
            return f"it asks {g} GPUs; team {j.team}'s quota is {self.quota[j.team]}"
        if (q := self.queue_of.get(j.team)) is not None:
            most = min(self.nominal[q] + self.borrow[q], self.cohort_nominal)
            if g > most:
                return f"it asks {g} GPUs; ClusterQueue {q} may hold at most {most:g}"
        return None

    def _result(self) -> Replay:
        end = self.now
        out = []
        for i, j in enumerate(self.jobs):
            held = self.held[i]
            # Running: cannot happen once every event ran (kept for a future horizon); pending: a job whose
            # pods, placed one by one, never all found room.
            held += self.size[i] * (end - self.since[i])
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
                    deleted=self.deleted[i],
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
