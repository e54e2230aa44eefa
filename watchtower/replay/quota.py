"""A team's quota (a ResourceQuota: charged from a job's admission to its end, its controller retrying the
pods it refused) and the jobs that leave the queue unstarted (deleted, or given up on)."""

from __future__ import annotations

from .state import DONE, GIVE_UP, PENDING, RETRY, RunState


class Quotas(RunState):
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
                        self._push(self.now + self.give_up, GIVE_UP, i)
                self.next_try[i] = self.now + self.backoff[i]
                self.backoff[i] = min(most, self.backoff[i] * 2)
                self._push(self.next_try[i], RETRY, i)
                kept.append(i)
        self.unadmitted[team] = kept
        return grew

    def _fits_quota(self, i: int) -> bool:
        """Return whether job i's team quota has room now for the rest of its minimum."""
        need, team = self.need[i], self.jobs[i].team
        room = (self.quota[team] - self.team_used.get(team, 0)) // need.gpus
        return self.quota_held[i] // need.gpus + room >= need.fewest

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

    def _delete(self, i: int) -> bool:
        """Job i deleted (the trace's `deleted`): one that never started leaves the queue and gives back
        its quota; one that started keeps running (its record says how it ended). Return whether quota
        was freed."""
        if self.state[i] != PENDING or self.first_start[i] is not None:
            return False
        self.state[i] = DONE
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

    def _finish(self, i: int) -> None:
        self.state[i] = DONE
        self.finished[i] = self.now
        self.running.discard(i)
        self._release(i)
        if self.quota_held[i]:
            team = self.jobs[i].team
            self.team_used[team] -= self.quota_held[i]
            self.quota_held[i] = 0
            self._admit(team)  # the freed room goes to the jobs due now (the others, when they retry)
