"""The mutable picture of a replay in progress, shared by its parts (engine.py's event loop and scheduling
pass, quota.py, preemption.py): each job's state, what it holds and where, the queue, the event heap, the
quotas' charges; and the few moves every part makes on it (queueing a job, giving it pods, starting it,
taking its pods back)."""

from __future__ import annotations

import bisect
import heapq
import math
from collections.abc import Sequence

from .placement import Cluster, Need
from .policy import ReplayPolicy
from .trace import TraceJob

# At one instant: capacity freed before new work arrives.
FINISH, GRACE_END, DELETE, RETRY, ARRIVAL, GIVE_UP = 0, 1, 2, 3, 4, 5
PENDING, RUNNING, RESERVED, TERMINATING, DONE, REFUSED = range(6)


class RunState:
    def __init__(self, jobs: Sequence[TraceJob], policy: ReplayPolicy, prune: bool = True) -> None:
        self.jobs = jobs
        self.prune = prune
        self.policy = policy
        self.cluster = Cluster(policy)
        # Each job's own time to stop when preempted (its trace's `grace`), else the policy's.
        self.grace = [j.grace if j.grace is not None else policy.termination_grace for j in jobs]
        self.resume = policy.restart.mode == "resume"
        self.checkpoint = policy.restart.checkpoint_every
        n = len(jobs)
        self.need = [
            Need(
                j.pods,
                j.gpus_per_pod,
                float(j.cpu_millis_per_pod or 0),
                float(j.memory_bytes_per_pod or 0),
                j.gang_min if j.gang_min is not None and j.gang_min < j.pods else 0,
                policy.gangs == "declared" and j.gang_min is None and j.pods > 1,
            )
            for j in jobs
        ]
        shapes: dict[Need, int] = {}
        self.kind = [
            (shapes.setdefault(need, len(shapes)), j.tier) for need, j in zip(self.need, jobs, strict=True)
        ]
        self.needs = list(shapes)  # shape id -> need
        self.waiting: dict[tuple[int, str], int] = {}  # kind -> jobs of that kind pending
        self.state = [PENDING] * n
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
        self.uncharged = [0] * n  # GPUs of its preempted pods, charged until they are gone (quota_retry)
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

    def _push(self, t: float, kind: int, i: int, token: int | None = None) -> None:
        self.seq += 1
        if kind != RETRY:
            self.live += 1
        heapq.heappush(self.events, (t, kind, self.seq, i, self.token[i] if token is None else token))

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
        self.state[i] = RUNNING
        self.run_start[i] = self.now
        self.token[i] += 1
        if self.jobs[i].preemptible:
            self.running.add(i)
        self._push(self.now + self.remaining[i], FINISH, i)

    def _release(self, i: int) -> None:
        self.partial.discard(i)
        self._account(i)
        self.cluster.take(self.need[i], self.where[i], -1)
        self._charge(i, -1)
        self.where[i], self.size[i], self.placed[i] = [], 0, 0
