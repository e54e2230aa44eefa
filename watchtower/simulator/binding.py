"""kube-scheduler's decisions applied to the simulated cluster: binding, preemption, unschedulable pods, gangs.

scheduler.py decides where a pod goes; this writes what the decision does to the pods, the gang PodGroups
and the scheduler's events, as kube-scheduler would. A form's own scheduler (Volcano's stand-in) binds and
refuses its pods here too, in its own words, in its `session` hook after kube-scheduler's cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING

from watchtower.simulator import events
from watchtower.simulator import objects as obj
from watchtower.simulator.forms.gangs import objects as grp
from watchtower.simulator.pods import SimPod, SimWorkload, memory_bytes
from watchtower.simulator.scheduler import (
    TERMINATING_ON_NOMINATED,
    Bind,
    Preempt,
    SchedNode,
    Scheduler,
    queue_order,
)

if TYPE_CHECKING:
    from watchtower.simulator.events import EventLog
    from watchtower.simulator.hooks import FormController
    from watchtower.simulator.store import Store

# An unschedulable pod is retried when the cluster frees something, or after this long (the scheduler's
# queueing hints and its periodic flush of the unschedulable queue).
RETRY_UNSCHEDULABLE = 60.0


def sched_nodes(store: Store, devices: Mapping[str, int]) -> list[SchedNode]:
    """Return the nodes as the scheduler reads them: allocatable and whether cordoned."""
    out = []
    for name, n in store.nodes.items():
        a = n["status"]["allocatable"]
        out.append(
            SchedNode(
                name,
                int(a.get("nvidia.com/gpu", 0)),
                int(a["cpu"]) * 1000,
                memory_bytes(a["memory"]),
                int(a["pods"]),
                bool(n["spec"].get("unschedulable")),
                devices.get(name, 0),
            )
        )
    return out


def _node_key(store: Store, devices: Mapping[str, int]) -> tuple[object, ...]:
    """What sched_nodes reads, compared as is: a node cordoned in place (as tests do) changes it."""
    return tuple(
        (name, n["spec"].get("unschedulable"), *n["status"]["allocatable"].values(), devices.get(name, 0))
        for name, n in store.nodes.items()
    )


class NodeTable:
    """sched_nodes kept across ticks: the nodes rarely change, and parsing them every 10 simulated seconds
    was a tenth of a simulated week."""

    def __init__(self) -> None:
        self._key: tuple[object, ...] | None = None
        self._nodes: list[SchedNode] = []

    def get(self, store: Store, devices: Mapping[str, int]) -> list[SchedNode]:
        """`devices`: the GPUs each node offers as devices (DRA), by node."""
        key = _node_key(store, devices)
        if key != self._key:
            self._key, self._nodes = key, sched_nodes(store, devices)
        return self._nodes


class KubeScheduler:
    """kube-scheduler's cycle over the store: the pending pods in queue order, each decision applied; then the
    forms' sessions (Volcano's stand-in), which bind and refuse their pods here too."""

    def __init__(self, store: Store, log: EventLog, forms: Sequence[FormController]) -> None:
        self.store, self.log, self.forms = store, log, forms
        self.node_table = NodeTable()  # the scheduler's view of the nodes, kept across ticks

    def schedule(self, t: float) -> None:
        """Take the pending pods in queue order and apply what the scheduler decides for each; then the forms'
        sessions."""
        made: list[Scheduler] = []

        def ledger() -> Scheduler:
            # Built at its first use: most ticks of a busy cluster try no pod (each was refused less than a
            # minute ago with nothing freed since). Nothing before that first use changes what it loads.
            if not made:
                s = Scheduler(self.node_table.get(self.store, self.store.device_gpus), self.store.rng)
                s.load(p for p in self.store.pods.values() if not p.terminal)
                made.append(s)
            return made[0]

        # A pod whose claim is not made yet is held in PreEnqueue (DynamicResources): no attempt, no word;
        # so is a pod with a scheduling gate (SchedulingGates), until an update removes its last.
        # The properties spelled out (terminating, terminal): this runs over every pod every 10 simulated s.
        pending = [
            p
            for p in self.store.pods.values()
            if not p.node
            and p.deletion is None
            and p.phase not in ("Succeeded", "Failed")
            and not p.scheduler
            and not p.gates
            and (p.claim is not None or not p.dra_gpus)
        ]
        gen = self.store.generation
        gangs_seen: set[str] = set()
        for p in queue_order(pending):
            if p.group:
                # A gang is taken as one, at its first member in queue order.
                if p.workload.uid not in gangs_seen:
                    gangs_seen.add(p.workload.uid)
                    self._schedule_gang(ledger, p.workload, t)
                continue
            if p.tried_at is not None and p.tried_generation == gen and t - p.tried_at < RETRY_UNSCHEDULABLE:
                continue
            d = ledger().schedule(p)
            p.tried_at, p.tried_generation = t, gen
            if isinstance(d, Bind):
                self.bind(p, d.node, t)
            elif isinstance(d, Preempt):
                self._preempt(p, d, t)
            else:
                self.unschedulable(p, d.message, t)
        for f in self.forms:
            f.session(self.store, self.log, self, ledger, t)

    def _schedule_gang(self, ledger: Callable[[], Scheduler], w: SimWorkload, t: float) -> None:
        """Place a 1.36 gang all together or not at all (KEP-4671, the GangScheduling plugin).

        Until minCount of its pods exist they are held in PreEnqueue: no attempt, no condition, no event."""
        members = [q for q in w.slots.values() if q is not None and not q.terminal]
        if len(members) < len(w.spec.pods):
            return
        waiting = queue_order(q for q in members if not q.node and not q.terminating)
        gen = self.store.generation
        if not waiting or all(
            q.tried_at is not None and q.tried_generation == gen and t - q.tried_at < RETRY_UNSCHEDULABLE
            for q in waiting
        ):
            return
        sched = ledger()
        saved = sched.save()
        decisions = [(q, sched.schedule(q)) for q in waiting]
        for q in waiting:
            q.tried_at, q.tried_generation = t, gen
        failed = next((d for _, d in decisions if not isinstance(d, Bind)), None)
        if failed is None:
            for q, d in decisions:
                assert isinstance(d, Bind)
                self.bind(q, d.node, t)
            self._pod_group_condition(w, t, scheduled=True)
            return
        sched.restore(saved)  # nothing of a gang that does not fit is placed (nor preempts, here)
        for q in waiting:
            self.unschedulable(q, failed.message, t)
        self._pod_group_condition(w, t, scheduled=False, message=failed.message)

    def _pod_group_condition(self, w: SimWorkload, t: float, *, scheduled: bool, message: str = "") -> None:
        body = self.store.pod_groups.get(w.uid)
        if body is None:
            return
        old = (body["status"].get("conditions") or [None])[0]
        if old is not None and (old["status"] == "True" or (not scheduled and old.get("message") == message)):
            return  # once scheduled it never goes back; the same words are no change
        new = grp.pod_group_condition(t, scheduled=scheduled, message=message)
        if old is not None and old["status"] == new["status"]:
            new["lastTransitionTime"] = old["lastTransitionTime"]
        body["status"]["conditions"] = [new]
        self.store.emit("PodGroup", body, "MODIFIED")

    def bind(self, p: SimPod, node: str, t: float, *, scheduler: str = "") -> None:
        """Bind a pod to a node; `scheduler` names another scheduler (Volcano) whose core/v1 event says so."""
        p.node = node
        p.nominated = ""
        p.sched_cond = obj.scheduled(t)
        p.start_time = t + 1.0
        p.pulled_at = t + self.store.rng.uniform(20.0, 180.0)  # image pull: GPU images are large
        taken = {i for q in self.store.pods.values() if q.node == node and not q.terminal for i in q.gpu_ids}
        free = [i for i in range(self.store.config.gpus_per_node) if i not in taken]
        p.gpu_ids = tuple(free[: p.gpus + p.dra_gpus])
        for f in self.forms:
            f.bound(self.store, p, t)
        self.store.stats["bound"] += 1
        self.log.forget(p)
        self.store.emit_pod(p, "MODIFIED")
        note = f"Successfully assigned {p.namespace}/{p.name} to {node}"
        ev = events.scheduling_event(p, "Scheduled", note, t, scheduler=scheduler)
        self.log.on_pod(ev, p, t)

    def _preempt(self, p: SimPod, d: Preempt, t: float) -> None:
        for v in d.victims:
            assert isinstance(v, SimPod)
            self.store.stats["preemptions"] += 1
            v.disruption = obj.condition(
                "DisruptionTarget",
                "True",
                t,
                reason="PreemptionByScheduler",
                message="default-scheduler: preempting to accommodate a higher priority pod",
            )
            # Training checkpoints before it exits; serving and notebooks stop quickly.
            actual = (
                self.store.rng.uniform(0.3, 1.0) * v.grace
                if v.grace > 60
                else self.store.rng.uniform(2.0, 10.0)
            )
            self.store.terminate(v, t, actual=actual)
            ev = obj.scheduler_event(
                namespace=v.namespace,
                reason="Preempted",
                note=f"Preempted by pod {p.uid} on node {d.node}",
                regarding=events.ref(v),
                related=events.ref(p),
                at=t,
            )
            self.log.on_pod(ev, v, t)
        p.nominated = d.node
        self.unschedulable(p, d.message, t, force=True)

    def unschedulable(
        self, p: SimPod, message: str, t: float, *, force: bool = False, scheduler: str = ""
    ) -> None:
        """Mark a pod unschedulable in `message`'s words; `scheduler` names another scheduler (Volcano)."""
        c = p.sched_cond
        # PodScheduled=False keeps its first lastTransitionTime while the message changes (DESIGN §3.3).
        if p.unschedulable_since is None:
            p.unschedulable_since = t
        changed = c is None or c.get("message") != message
        if not force and p.nominated and TERMINATING_ON_NOMINATED not in message:
            p.nominated = ""  # preemption found nothing: the scheduler clears the nomination
            changed = True
        if changed or force:
            p.sched_cond = obj.unschedulable(p.unschedulable_since, message)
            self.store.emit_pod(p, "MODIFIED")
        self.log.failed_scheduling(p, message, t, scheduler=scheduler)
