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
  (the freed room goes to whoever asks first), its pods charged one at a time under `per_pod`; a preempted
  pod gives its quota back when it is gone and is charged again when its controller makes it anew. A job the
  trace says was `deleted` before it started leaves the queue and its quota then; a victim with a `grace`
  of its own holds its GPUs that long. Under `quota_retry.give_up_after` people delete a job its quota
  refused that long; a job without a `controller` (bare pods) its quota refuses on arrival is turned away.
- Under `gangs: declared` a job without a `gang_min` has its pods placed one by one as each fits, each
  holding its node idle until the last is placed (a pending job's placed pods are victims as any bound
  pod's); preempted, it loses only its pods on the preemptor's nodes. A preemptor waiting for its victims
  starts wherever room frees first, their place staying taken until they are gone.
The engine draws no random numbers: the same trace under the same policy gives the same result.

The parts: this module's event loop and scheduling pass (which job is tried when, and how its pods are
placed), state.py (the run's shared, mutable picture: each job's state, what it holds, the queue and the
event heap), placement.py (the nodes and the fit of a job's pods), quota.py (a team's ResourceQuota, its
controllers' retries, deletions), preemption.py (victims, graces, Kueue's reclaim), outcome.py (what a
replay gives).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

from .outcome import JobOutcome, Replay, as_observed
from .placement import Need, covers
from .policy import ReplayPolicy
from .preemption import Preemption
from .quota import Quotas
from .state import ARRIVAL, DELETE, FINISH, GIVE_UP, PENDING, REFUSED, RETRY, RUNNING
from .trace import TraceJob

__all__ = ["JobOutcome", "Replay", "as_observed", "replay"]


def replay(jobs: Sequence[TraceJob], policy: ReplayPolicy, *, prune: bool = True) -> Replay:
    """Return what becomes of `jobs` under `policy` (see the module's docstring for the model). `prune`: pass
    over the pending jobs a scheduling pass has shown cannot start (off: try each one, the same result slower;
    the tests compare the two)."""
    return _Run(jobs, policy, prune).run()


class _Run(Quotas, Preemption):
    def run(self) -> Replay:
        for i, j in enumerate(self.jobs):
            if reason := self._refusal(i):
                self.refused[i], self.state[i] = reason, REFUSED
            else:
                self._push(j.submitted, ARRIVAL, i)
                if j.deleted is not None:
                    self._push(max(j.deleted, j.submitted), DELETE, i)
        while self.events:
            if self.live == 0 and not any(self._fits_quota(e[3]) for e in self.events):
                break  # only quota retries left, none with room: nothing will ever free what they wait for
            t = self.events[0][0]
            self.now = t
            freed, arrived, retried = False, [], set()
            while self.events and self.events[0][0] == t:
                _, kind, _, i, token = heapq.heappop(self.events)
                if kind != RETRY:
                    self.live -= 1
                if kind == ARRIVAL:
                    arrived.append(i)
                elif kind == RETRY:
                    retried.add(self.jobs[i].team)
                elif kind == DELETE:
                    freed |= self._delete(i)
                elif kind == GIVE_UP:
                    # Its owner deletes it only if its quota has refused it all that time.
                    since = self.refused_since[i]
                    if since is not None and self.give_up is not None and t - since >= self.give_up:
                        freed |= self._delete(i)
                elif kind == FINISH:
                    if token == self.token[i] and self.state[i] == RUNNING:
                        self._finish(i)
                        freed = True
                else:
                    self._grace_ends(i, token)
                    freed = True
            arrived = [i for i in arrived if self.state[i] == PENDING]  # not deleted on arrival
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
            if self.state[i] == PENDING:  # never started (quota or a queue kept it out to the end)
                self.waited[i] += self.now - self.queued_at[i]
        return self._result()

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
                    and covers(need, self.needs[other[0]])
                ):
                    dead.add(other)
            if len(dead) >= len(self.waiting) and not self.reclaiming:
                break  # every kind still pending fails: the rest wait (a reclaim would not, by its queue)
        for k in reversed(started):
            del pending[k]

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
        rest = Need(left, need.gpus, need.cpu, need.memory)
        return self._preempt_for(i, rest, self._victims(i, rest))

    def _place(self, i: int, need: Need) -> bool:
        if need.fewest * need.gpus <= self.cluster.total_free:
            where = self.cluster.placement(need)
            if where is not None:
                self._hold(i, where)
                self._start(i)
                return True
        return self._preempt_for(i, need, self._victims(i, need))

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
