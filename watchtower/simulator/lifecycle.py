"""How simulated work runs and ends: the kubelet stand-in, completion, deletion with grace, garbage collection.

Each function writes through the store (store.py), in the order a tick of cluster.py calls them; the
controllers that make pods are in controllers.py. A pod's deletion with grace is the store's `terminate`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from watchtower.simulator.pods import CONTROLLER, SimPod, SimWorkload

if TYPE_CHECKING:
    from collections.abc import Sequence

    from watchtower.simulator.events import EventLog
    from watchtower.simulator.hooks import FormController
    from watchtower.simulator.store import Store

FINISHED_POD_TTL = 900.0  # finished pods are cleaned up after a while (Job TTL, operator cleanup)


def kubelet(store: Store, log: EventLog, t: float) -> None:
    """Start the bound pods whose image is pulled; delete the pods whose time to go has come."""
    for p in list(store.pods.values()):
        if p.gone_at is not None and p.gone_at <= t:
            _delete(store, log, p)
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
            store.emit_pod(p, "MODIFIED")


def _delete(store: Store, log: EventLog, p: SimPod) -> None:
    del store.pods[p.uid]
    store.freed()
    log.forget(p)
    w = p.workload
    for k, v in w.slots.items():
        if v is p:
            w.slots[k] = None
            if not w.done and w.spec.kind in CONTROLLER:
                w.next_create = max(w.next_create, store.now())
    if w.spec.kind == "Pod" and not w.done and p.finished_at is None:
        w.done = True  # a bare pod that is gone is gone: nobody recreates it
    store.emit_pod(p, "DELETED")


def progress(store: Store, forms: Sequence[FormController], t: float, dt: float) -> None:
    """Advance the workloads whose every pod runs; complete those that are done; forget those that are gone."""
    for w in store.workloads:
        if w.done:
            continue
        if w.slots and _all_running(w):
            if w.first_running is None:
                _first_start(w)
            w.progress += dt
            if w.progress >= w.spec.duration:
                _complete(store, w, t)
    kept = []
    for w in store.workloads:
        if w.done and not any(w.slots.values()):
            _controller_gone(store, forms, w)
        else:
            kept.append(w)
    store.workloads = kept


def _all_running(w: SimWorkload) -> bool:
    """Whether every slot holds a running pod not being deleted (a loop: this runs for every workload
    every 10 simulated seconds)."""
    for p in w.slots.values():  # noqa: SIM110 (a loop, not all() over a generator: faster here)
        if p is None or p.running_since is None or p.deletion is not None:
            return False
    return True


def _first_start(w: SimWorkload) -> None:
    pods = [p for p in w.slots.values() if p is not None]
    # start_time is a second after the binding (binding.py): the bound moment is what a queue's wait ends at.
    w.first_bound = max((p.start_time or 0.0) - 1.0 for p in pods)
    w.first_running = max(p.running_since or 0.0 for p in pods)


def _controller_gone(store: Store, forms: Sequence[FormController], w: SimWorkload) -> None:
    """Delete the controller of a workload that is over (a finished Job's TTL, a scaled-down Deployment),
    then what the forms made for it."""
    known = store.controllers.pop(w.uid, None)
    if known is not None:
        store.emit(known[0], known[1], "DELETED")
    for f in forms:
        f.gone(store, w)


def _complete(store: Store, w: SimWorkload, t: float) -> None:
    w.done = True
    store.freed()
    store.stats["completed"] += 1
    known = store.controllers.get(w.uid)
    if known is not None and known[0] == "Job":  # the Job controller counts what succeeded
        body = known[1]
        body["status"]["succeeded"] = len(w.spec.pods)
        store.emit("Job", body, "MODIFIED")
    for p in w.slots.values():
        if p is None:
            continue
        if w.spec.kind == "ReplicaSet":
            store.terminate(p, t, actual=5.0)  # scaled down: deleted, no disruption condition
        else:
            p.phase = "Succeeded"
            p.finished_at = t
            p.gone_at = t + FINISHED_POD_TTL
            store.emit_pod(p, "MODIFIED")
