"""A vc-scheduler stand-in for the PaddleJobs that name a Volcano queue: enqueue, allocate, the groups' status.

What it does each tick, as vc-scheduler's session does (sources in volcano_objects.py):
- enqueue: a Pending group goes Inqueue when the cluster's idle GPUs (x the overcommit factor) and its
  queue's capability hold its minResources; otherwise a Normal `Unschedulable` event on the group says
  which refused it, and no condition (the gang plugin skips a group with no pods).
- paddle-operator makes the pods only once the group is Inqueue or Running (the cluster asks `admits`).
- allocate: an Inqueue group's pods are placed all together or not at all (no preemption: Volcano's
  default actions are enqueue, allocate, backfill); a failure is the gang plugin's Unschedulable condition
  and the pods' PodScheduled=False, in Volcano's words; success is the Scheduled condition and Running.
- each Queue's status.allocated follows its bound pods.
- Volcano 1.15's queue gate (SchedulingGatesQueueAdmission, forms/gated/objects.py): a group's gated pods
  count at enqueue like any; once the group is let into its queue, allocate removes their
  `scheduling.volcano.sh/queue-allocation-gate` (the queue has room) and places them; a pod with any
  gate left is not allocated.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from watchtower.simulator.forms.gangs import volcano_objects as vo
from watchtower.simulator.forms.gated import objects as go
from watchtower.simulator.hooks import Binder
from watchtower.simulator.pods import SimPod, SimWorkload
from watchtower.simulator.scheduler import SchedNode, Scheduler
from watchtower.simulator.workloads import CLASS_BY_NAME

if TYPE_CHECKING:
    from watchtower.simulator.events import EventLog
    from watchtower.simulator.store import Store

ROOT_QUEUE, DEFAULT_QUEUE = "root", "default"  # vc-scheduler's own queues (the capture)
RETRY_EVERY = 60.0  # a group refused at enqueue or allocate is tried again after this long, or on a change


@dataclass
class _Group:
    workload: SimWorkload
    body: dict[str, Any]
    gpus: int
    tried_at: float | None = None
    tried_generation: int = -1
    events: dict[str, dict[str, Any]] = field(default_factory=dict)  # folded by message


class VolcanoScheduler:
    """The queues and the PodGroups of Volcano-scheduled PaddleJobs, and the session that moves them."""

    def __init__(self, created: float, *, overcommit_factor: float = vo.OVERCOMMIT_FACTOR) -> None:
        # The overcommit plugin's `overcommit-factor` argument: how far past the idle GPUs it lets groups in.
        self.overcommit_factor = overcommit_factor
        self.queues: dict[str, dict[str, Any]] = {
            ROOT_QUEUE: vo.queue(ROOT_QUEUE, created=created, hierarchy_root=True),
            DEFAULT_QUEUE: vo.queue(DEFAULT_QUEUE, created=created),
        }
        self.groups: dict[str, _Group] = {}  # by the PaddleJob's uid
        self._session = 0

    def add_queue(self, name: str, **kw: Any) -> dict[str, Any]:
        created = self.queues[ROOT_QUEUE]["metadata"]["creationTimestamp"]
        q = vo.queue(name, created=0.0, **kw)
        q["metadata"]["creationTimestamp"] = created
        self.queues[name] = q
        return q

    def pod_group(self, w: SimWorkload) -> dict[str, Any]:
        """Make the PodGroup paddle-operator creates for a Volcano PaddleJob, before any of its pods."""
        spec = w.spec
        gpus = sum(t.gpus for t in spec.pods)
        cpu = sum(int(t.cpu) * 1000 for t in spec.pods)
        mem = sum(int(t.memory.removesuffix("Gi")) * 2**30 for t in spec.pods)
        body = vo.pod_group(
            job=spec.name,
            namespace=spec.namespace,
            created=w.created,
            job_uid=w.uid,
            min_member=len(spec.pods),
            min_resources=vo.resources(gpus, cpu, mem),
            queue_name=spec.volcano_queue,
            priority_class=spec.priority_class,
        )
        self.groups[w.uid] = _Group(w, body, gpus)
        return body

    def admits(self, w: SimWorkload) -> bool:
        """Return whether paddle-operator may make the job's pods: its group is Inqueue or Running."""
        g = self.groups.get(w.uid)
        return g is not None and g.body["status"].get("phase") in ("Inqueue", "Running")

    def forget(self, w: SimWorkload) -> dict[str, Any] | None:
        g = self.groups.pop(w.uid, None)
        return g.body if g is not None else None

    # ---- the session ------------------------------------------------------------------------------

    def session(
        self, store: Store, log: EventLog, binder: Binder, ledger: Callable[[], Scheduler], t: float
    ) -> None:
        """Run one scheduling session at `t` against the ledger kube-scheduler's cycle left (`ledger()`
        builds it on first use); its pods are bound and refused through `binder`, its events folded in `log`."""
        self._session += 1
        gen = store.generation
        for g in sorted(self.groups.values(), key=_order):
            st = g.body["status"]
            phase = st.get("phase")
            fresh = g.tried_at is None or g.tried_generation != gen or t - g.tried_at >= RETRY_EVERY
            if phase is None:
                st["phase"] = "Pending"
                store.emit("VolcanoPodGroup", g.body, "MODIFIED")
                phase = "Pending"
            if phase == "Pending" and fresh:
                g.tried_at, g.tried_generation = t, gen
                self._enqueue(store, log, ledger(), g, t)
            elif phase == "Inqueue":
                members = [p for p in g.workload.slots.values() if p is not None and not p.terminal]
                for p in members:  # let into its queue: the queue has room for it
                    store.ungate(p, go.VOLCANO_QUEUE_GATE)
                if (
                    fresh
                    and len(members) == len(g.workload.spec.pods)
                    and not any(p.node or p.gates for p in members)
                ):
                    g.tried_at, g.tried_generation = t, gen
                    self._allocate(store, log, binder, ledger(), g, members, t)
            if st.get("phase") == "Running":
                running = sum(1 for p in g.workload.slots.values() if p is not None and p.phase == "Running")
                if st.get("running", 0) != running:
                    st["running"] = running
                    store.emit("VolcanoPodGroup", g.body, "MODIFIED")
        self._allocated(store)

    def _inqueue_gpus(self, queue: str | None = None) -> int:
        """GPUs the Inqueue groups have been let in for and do not hold yet (vc-scheduler's inqueue)."""
        return sum(
            g.gpus
            for g in self.groups.values()
            if g.body["status"].get("phase") == "Inqueue"
            and (queue is None or g.body["spec"]["queue"] == queue)
        )

    def _bound_gpus(self, queue: str) -> int:
        """GPUs the bound pods of a queue's groups hold (what `_allocated` writes as status.allocated)."""
        return sum(
            p.gpus
            for g in self.groups.values()
            if (g.body["spec"]["queue"] if g.body["spec"]["queue"] in self.queues else DEFAULT_QUEUE) == queue
            for p in g.workload.slots.values()
            if p is not None and p.node and not p.terminal
        )

    def _enqueue(self, store: Store, log: EventLog, sched: Scheduler, g: _Group, t: float) -> None:
        q = self.queues.get(g.body["spec"]["queue"]) or self.queues[DEFAULT_QUEUE]
        refused = ""
        # Tier order of the default configuration: overcommit before proportion.
        if self._inqueue_gpus() + g.gpus > sched.idle_gpus() * self.overcommit_factor:
            refused = vo.CLUSTER_FULL
        else:
            cap = q["spec"].get("capability", {}).get(vo.GPU)
            # What its pods hold now: status.allocated is written at the session's end, after a group
            # allocated earlier in this session.
            used = self._bound_gpus(q["metadata"]["name"])
            if cap is not None and used + self._inqueue_gpus(q["metadata"]["name"]) + g.gpus > int(cap):
                refused = vo.QUEUE_FULL
        if refused:
            self._event(log, g, "Normal", refused, t)
            return
        g.body["status"]["phase"] = "Inqueue"
        store.emit("VolcanoPodGroup", g.body, "MODIFIED")
        store.wake(g.workload)  # the operator reconciles on its group's change

    def _allocate(
        self,
        store: Store,
        log: EventLog,
        binder: Binder,
        sched: Scheduler,
        g: _Group,
        members: list[SimPod],
        t: float,
    ) -> None:
        saved = sched.save()
        placed: list[tuple[SimPod, str]] = []
        failed: SimPod | None = None
        for p in sorted(members, key=lambda p: p.name):
            node = sched.place(p)
            if not node:
                failed = p  # allocate.go: the gang cannot be met, stop allocating this job
                break
            placed.append((p, node))
        st = g.body["status"]
        if failed is None:
            for p, node in placed:
                binder.bind(p, node, t, scheduler=vo.SCHEDULER)
            st["phase"] = "Running"
            st["conditions"] = [
                vo.condition("Scheduled", t, reason=vo.READY_REASON, message="", session=str(self._session))
            ]
            store.emit("VolcanoPodGroup", g.body, "MODIFIED")
            self._event(log, g, "Normal", "pod group is ready", t, reason="Scheduled")
            return
        sched.restore(saved)
        n, schedulable = len(members), len(placed)
        pending = {"Unschedulable": n - schedulable}
        if schedulable:
            pending["Schedulable"] = schedulable
        origin = vo.nodes_unavailable(_node_reasons(sched.nodes), len(sched.nodes))
        fit = f"{vo.fit_error({'Pending': n}, n, pending)}. Origin reason is {failed.name}: {origin}"
        # gang.go counts the tasks short of minAvailable; cache.go's event counts the Pending ones.
        gang = f"{n - schedulable}/{n} tasks in gang unschedulable: {fit}"
        old = (st.get("conditions") or [None])[0]
        if old is None or old.get("message") != gang:
            st["conditions"] = [
                vo.condition(
                    "Unschedulable", t, reason=vo.NOT_ENOUGH, message=gang, session=str(self._session)
                )
            ]
            store.emit("VolcanoPodGroup", g.body, "MODIFIED")
        self._event(log, g, "Warning", f"{n}/{n} tasks in gang unschedulable: {fit}", t)
        nodes = dict(placed)
        for p in members:
            if p in nodes:  # job_info.go TaskSchedulingReason: Allocated in the discarded statement
                msg = (
                    f"Pod {p.namespace}/{p.name} can possibly be assigned to {nodes[p]}, "
                    "once minAvailable is satisfied"
                )
            else:
                msg = origin if p is failed else fit
            binder.unschedulable(p, msg, t, scheduler=vo.SCHEDULER)

    def _event(
        self,
        log: EventLog,
        g: _Group,
        type_: str,
        message: str,
        t: float,
        *,
        reason: str = "Unschedulable",
    ) -> None:
        body = g.body
        ref = {
            "kind": "PodGroup",
            "namespace": body["metadata"]["namespace"],
            "name": body["metadata"]["name"],
            "uid": body["metadata"]["uid"],
            "apiVersion": vo.VOLCANO_API,
        }
        log.fold(g.events, ref, reason=reason, message=message, type_=type_, component=vo.SCHEDULER, t=t)

    def _allocated(self, store: Store) -> None:
        totals: dict[str, list[int]] = {name: [0, 0, 0, 0] for name in self.queues}
        for g in self.groups.values():
            name = g.body["spec"]["queue"] if g.body["spec"]["queue"] in self.queues else DEFAULT_QUEUE
            for p in g.workload.slots.values():
                if p is None or not p.node or p.terminal:
                    continue
                for q in (name, ROOT_QUEUE):
                    a = totals[q]
                    a[0] += p.gpus
                    a[1] += p.cpu_millis
                    a[2] += p.memory_bytes
                    a[3] += 1
        for name, q in self.queues.items():
            new = vo.allocated(*totals[name])
            if q["status"]["allocated"] != new:
                q["status"]["allocated"] = new
                store.emit("VolcanoQueue", q, "MODIFIED")

    def objects(self, kind: str) -> Iterable[dict[str, Any]]:
        if kind == "VolcanoQueue":
            return list(self.queues.values())
        return [g.body for g in self.groups.values()]


def _order(g: _Group) -> tuple[int, float]:
    c = CLASS_BY_NAME.get(g.workload.spec.priority_class)
    return (-(c.value if c is not None else 0), g.workload.created)


def _node_reasons(nodes: Iterable[SchedNode]) -> dict[str, int]:
    """The per-node reasons of the task that found no node: cordoned nodes, the others short of GPUs."""
    out: dict[str, int] = {}
    for n in nodes:
        r = vo.UNSCHEDULABLE_NODE if n.unschedulable else vo.NO_FIT
        out[r] = out.get(r, 0) + 1
    return out
