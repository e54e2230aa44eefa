"""Preemption as kube-scheduler does it (victims of a lower priority, the ones not needed spared, a grace
before the preemptor's place is free) and Kueue's reclaimWithinCohort; what becomes of a victim (its work
lost or kept, the queue again)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

from .placement import Need, fit
from .state import GRACE_END, PENDING, RESERVED, RETRY, RUNNING, TERMINATING, RunState


class Preemption(RunState):
    def _victims(self, i: int, need: Need) -> list[int]:
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
                -(self.run_start[v] if self.state[v] == RUNNING else self.since[v]),
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
        need = Need(need.fewest, need.gpus, need.cpu, need.memory)
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
        need: Need,
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
                and (where := fit(need, gpus, cpu, memory, c.spread)) is not None
            ):
                break
        else:
            return False
        # Spare every victim the preemptor does not need, the highest priority first.
        for v in reversed(chosen[:-1]):
            give(v, -1)
            rest = [u for u in chosen if u != v]
            if (quota_ok is None or quota_ok(rest)) and (
                w := fit(need, gpus, cpu, memory, c.spread)
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
        self.state[i] = RESERVED
        self.reserving.add(i)
        self.victims_of[self.seq + 1] = chosen
        self.preemption[i] = self.seq + 1
        # Its nominated place is free once the last victim is gone (kube-scheduler binds it then).
        self._push(self.now + max(self.grace[v] for v in chosen), GRACE_END, i, self.seq + 1)
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
        self.state[v] = TERMINATING
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
        if self.retry is not None and self.jobs[v].team in self.quota:
            self.uncharged[v] += gpus  # given back to its quota when they are gone (its grace's end)

    def _grace_ends(self, i: int, token: int) -> None:
        for v in self.victims_of.pop(token):
            if self.uncharged[v]:
                self._made_anew(v)
            if self.state[v] != TERMINATING:
                continue  # pods of a pending job, preempted: the job never left the queue
            self.state[v] = PENDING
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

    def _made_anew(self, v: int) -> None:
        """Under `quota_retry`: v's preempted pods are gone, their quota given back; its controller makes
        them again at once, each charged as it is made, and refused (its other pods idle meanwhile) when
        the room went to another job first, as a ResourceQuota charges a pod from its creation."""
        team, gone = self.jobs[v].team, min(self.uncharged[v], self.quota_held[v])
        self.uncharged[v] = 0
        if self.state[v] not in (PENDING, TERMINATING) or not gone:
            return  # deleted, or its pods placed again (still charged) and started meanwhile
        self.quota_held[v] -= gone
        self.team_used[team] -= gone
        if v not in self.unadmitted.setdefault(team, []):
            self.unadmitted[team].append(v)
        assert self.retry is not None
        self.next_try[v], self.backoff[v] = self.now, self.retry[0]
        self._push(self.now, RETRY, v)  # taken in this instant's events: its team is admitted again

    def _elsewhere(self, i: int) -> None:
        """A job waiting for its victims to stop starts now on room freed meanwhile, as kube-scheduler binds a
        nominated pod wherever it fits first; its victims stop all the same (their place stays taken until
        they are gone)."""
        if self.reserved[i] != self.size[i]:
            return  # a job placed pod by pod that holds pods of its own: it waits where it is
        need = self.need[i]
        want = Need(self.placed[i], need.gpus, need.cpu, need.memory)
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
