"""How simulated work runs and ends: the kubelet stand-in, completion, deletion with grace, garbage collection.

Each function acts on the one cluster (sim/cluster.py) and writes through its store, in the order a tick
calls them; the controllers that make pods are in sim/controllers.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from watchtower.simulator.pods import CONTROLLER, SimPod, SimWorkload

if TYPE_CHECKING:
    from watchtower.simulator.cluster import SimulatedCluster

FINISHED_POD_TTL = 900.0  # finished pods are cleaned up after a while (Job TTL, operator cleanup)


def kubelet(sim: SimulatedCluster, t: float) -> None:
    """Start the bound pods whose image is pulled; delete the pods whose time to go has come."""
    for p in list(sim.pods.values()):
        if p.gone_at is not None and p.gone_at <= t:
            _delete(sim, p)
        elif (
            p.node
            and p.running_since is None
            and p.pulled_at is not None
            and p.pulled_at <= t
            and p.deletion is None
            and not p.terminal
        ):
            p.phase = "Running"
            p.running_since = p.pulled_at
            sim.emit_pod(p, "MODIFIED")


def _delete(sim: SimulatedCluster, p: SimPod) -> None:
    del sim.pods[p.uid]
    sim.freed()
    sim.log.forget(p)
    w = p.workload
    for k, v in w.slots.items():
        if v is p:
            w.slots[k] = None
            if not w.done and w.spec.kind in CONTROLLER:
                w.next_create = max(w.next_create, sim.now())
    if w.spec.kind == "Pod" and not w.done and p.finished_at is None:
        w.done = True  # a bare pod that is gone is gone: nobody recreates it
    sim.emit_pod(p, "DELETED")


def progress(sim: SimulatedCluster, t: float, dt: float) -> None:
    """Advance the workloads whose every pod runs; complete those that are done; forget those that are gone."""
    for w in sim.workloads:
        if w.done:
            continue
        if w.slots and _all_running(w):
            w.progress += dt
            if w.progress >= w.spec.duration:
                _complete(sim, w, t)
    kept = []
    for w in sim.workloads:
        if w.done and not any(w.slots.values()):
            _controller_gone(sim, w)
        else:
            kept.append(w)
    sim.workloads = kept


def _all_running(w: SimWorkload) -> bool:
    """Whether every slot holds a running pod not being deleted (a loop: this runs for every workload
    every 10 simulated seconds)."""
    for p in w.slots.values():  # noqa: SIM110 (a loop, not all() over a generator: faster here)
        if p is None or p.running_since is None or p.deletion is not None:
            return False
    return True


def _controller_gone(sim: SimulatedCluster, w: SimWorkload) -> None:
    """Delete the controller of a workload that is over (a finished Job's TTL, a scaled-down Deployment)."""
    known = sim.controllers.pop(w.uid, None)
    if known is not None:
        sim.emit_object(known[0], known[1], "DELETED")
    # The garbage collector takes what the Job owned.
    for kind, held in (("PodGroup", sim.pod_groups), ("Workload", sim.gang_workloads)):
        owned = held.pop(w.uid, None)
        if owned is not None:
            sim.emit_object(kind, owned, "DELETED")
    kueue_workload = sim.kueue.forget(w)  # owned by the Job: the garbage collector takes it
    if kueue_workload is not None:
        sim.emit_object("KueueWorkload", kueue_workload, "DELETED")
    volcano_group = sim.volcano.forget(w)
    if volcano_group is not None:
        sim.emit_object("VolcanoPodGroup", volcano_group, "DELETED")
    for j in sim.child_jobs.pop(w.uid, ()):
        sim.emit_object("Job", j, "DELETED")


def _complete(sim: SimulatedCluster, w: SimWorkload, t: float) -> None:
    w.done = True
    sim.freed()
    sim.stats["completed"] += 1
    known = sim.controllers.get(w.uid)
    if known is not None and known[0] == "Job":  # the Job controller counts what succeeded
        body = known[1]
        body["status"]["succeeded"] = len(w.spec.pods)
        sim.emit_object("Job", body, "MODIFIED")
    for p in w.slots.values():
        if p is None:
            continue
        if w.spec.kind == "ReplicaSet":
            terminate(sim, p, t, actual=5.0)  # scaled down: deleted, no disruption condition
        else:
            p.phase = "Succeeded"
            p.finished_at = t
            p.gone_at = t + FINISHED_POD_TTL
            sim.emit_pod(p, "MODIFIED")


def terminate(sim: SimulatedCluster, p: SimPod, t: float, *, actual: float) -> None:
    """Delete a pod with its grace period: it is gone after `actual` seconds, or the grace, if sooner."""
    p.deletion = t + p.grace
    p.gone_at = t + min(actual, p.grace)
    sim.emit_pod(p, "MODIFIED")
