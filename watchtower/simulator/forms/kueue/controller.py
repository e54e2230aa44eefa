"""A Kueue stand-in for the Jobs that name a LocalQueue: suspended until admitted, preempted within the queue.

What it does each tick, as Kueue's scheduler and job reconciler do (shapes and words in objects.py):
- a queued Job is created suspended (no pods) with a Workload `QuotaReserved=False Pending` in the flavor
  assigner's words while its ClusterQueue's nominal quota is used up;
- Workloads are tried in Kueue's order (priority, then the queue timestamp: creation, or the eviction for a
  requeued one, BestEffortFIFO); one that fits the free quota is admitted (`QuotaReserved`, `Admitted`), its
  Job unsuspended, and the Job controller makes its pods; `PodsReady` once they all run;
- one that does not fit preempts lower-priority admitted Workloads of its ClusterQueue (withinClusterQueue:
  LowerPriority): `Evicted=True Preempted` and `Preempted=True InClusterQueue` naming it, the victim's Job
  suspended (its pods deleted) and the victim requeued;
- a finished Job's Workload gets `Finished` and releases its quota.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watchtower.simulator.forms.kueue import objects as ko
from watchtower.simulator.hooks import FormController
from watchtower.simulator.objects import ts
from watchtower.simulator.pods import SimWorkload

if TYPE_CHECKING:
    from watchtower.simulator.store import Store

KINDS = frozenset({"KueueWorkload", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"})

CLUSTER_QUEUE = "research-cq"
LOCAL_QUEUE = "research"
FLAVOR = "default-flavor"
CLASSES = {"kueue-low": 100, "kueue-high": 1_000_000}  # WorkloadPriorityClasses the story's jobs name


@dataclass
class _Entry:
    w: SimWorkload
    body: dict[str, Any]
    gpus: int
    priority: int
    queued_at: float
    admitted: bool = False
    finished: bool = False
    pod_set: str = "main"  # its pod set's name in Kueue's messages (a plain-pod group's is its role hash)


def _set(body: dict[str, Any], type_: str, status: str, at: float, reason: str, message: str) -> None:
    """Set a condition as apimeta.SetStatusCondition does: its time moves only when its status does."""
    conds: list[dict[str, Any]] = body["status"].setdefault("conditions", [])
    for c in conds:
        if c["type"] == type_:
            if c["status"] != status:
                c["lastTransitionTime"] = ts(at)
            c.update(status=status, reason=reason, message=message)
            return
    conds.append(
        {
            "type": type_,
            "status": status,
            "observedGeneration": 1,
            "lastTransitionTime": ts(at),
            "reason": reason,
            "message": message,
        }
    )


class KueueStandIn(FormController):
    """One ClusterQueue shared by the teams' LocalQueues, and the Workloads of the Jobs that name them."""

    kinds = KINDS

    def __init__(self) -> None:
        self.nominal = 0
        self.cluster_queue = ko.cluster_queue(CLUSTER_QUEUE, nominal_gpus=0)
        self.local_queues: dict[str, dict[str, Any]] = {}
        self.classes = [ko.workload_priority_class(n, v) for n, v in CLASSES.items()]
        self.entries: dict[str, _Entry] = {}  # by the Job's uid

    def setup(self, nominal_gpus: int, namespaces: list[str]) -> None:
        self.nominal = nominal_gpus
        self.cluster_queue = ko.cluster_queue(CLUSTER_QUEUE, nominal_gpus=nominal_gpus)
        self.local_queues = {ns: ko.local_queue(ns, LOCAL_QUEUE, CLUSTER_QUEUE) for ns in namespaces}

    def objects(self, kind: str) -> list[dict[str, Any]]:
        if kind == "KueueWorkload":
            return [e.body for e in self.entries.values()]
        if kind == "ClusterQueue":
            return [self.cluster_queue] if self.nominal else []
        if kind == "LocalQueue":
            return list(self.local_queues.values()) if self.nominal else []
        return self.classes if self.nominal else []

    def workload(self, w: SimWorkload, job: dict[str, Any], priority_class: str) -> dict[str, Any]:
        """Make the Workload Kueue's job reconciler creates for a new suspended Job."""
        gpus = sum(t.gpus for t in w.spec.pods)
        body = ko.workload(
            job=job,
            queue=w.spec.kueue_queue,
            created=w.created,
            priority=CLASSES[priority_class],
            priority_class=priority_class,
        )
        self.entries[w.uid] = _Entry(w, body, gpus, CLASSES[priority_class], w.created)
        return body

    def shape(self, w: SimWorkload, body: dict[str, Any]) -> None:
        if w.spec.kind == "Job" and w.spec.kueue_queue:  # Kueue's webhook suspends a Job that names a queue
            body["spec"]["suspend"] = True
            body["metadata"]["labels"] = {ko.QUEUE_LABEL: w.spec.kueue_queue}
            body["status"].pop("startTime", None)

    def created(self, store: Store, w: SimWorkload, body: dict[str, Any] | None) -> None:
        if w.spec.kueue_queue and body is not None:  # Kueue's job reconciler, for the suspended Job
            store.emit("KueueWorkload", self.workload(w, body, w.spec.kueue_class), "ADDED")

    def admits(self, w: SimWorkload) -> bool:
        """A queued Job is suspended (the Job controller makes no pod) until Kueue admits it."""
        if not w.spec.kueue_queue or w.spec.kind == "Pod":  # plain pods are made gated (forms/gated)
            return True
        e = self.entries.get(w.uid)
        return e is not None and e.admitted

    def queue(self, w: SimWorkload, body: dict[str, Any], priority_class: str) -> None:
        """Queue a Workload another integration made (a plain-pod group's, forms/gated) for admission."""
        gpus, priority = sum(t.gpus for t in w.spec.pods), CLASSES[priority_class]
        pod_set = body["spec"]["podSets"][0]["name"]
        self.entries[w.uid] = _Entry(w, body, gpus, priority, w.created, pod_set=pod_set)

    def admitted(self, w: SimWorkload) -> bool:
        """Return whether the workload's Workload holds quota now."""
        e = self.entries.get(w.uid)
        return e is not None and e.admitted and not e.finished

    def forget(self, w: SimWorkload) -> dict[str, Any] | None:
        e = self.entries.pop(w.uid, None)
        return e.body if e is not None else None

    def gone(self, store: Store, w: SimWorkload) -> None:
        kueue_workload = self.forget(w)  # owned by the Job: the garbage collector takes it
        if kueue_workload is not None:
            store.emit("KueueWorkload", kueue_workload, "DELETED")

    def _used(self) -> int:
        return sum(e.gpus for e in self.entries.values() if e.admitted and not e.finished)

    def reconcile(self, store: Store, t: float) -> None:
        """Finish, admit and preempt as Kueue's scheduler would at `t`; write what changed."""
        changed: set[str] = set()
        for uid, e in self.entries.items():
            if e.w.done and not e.finished:
                e.finished = True
                _set(e.body, "Finished", "True", t, "Succeeded", "Job finished successfully")
                changed.add(uid)
            elif e.admitted and not e.finished and self._pods_ready(e, t):
                changed.add(uid)
        free = self.nominal - self._used()
        waiting = sorted(
            (e for e in self.entries.values() if not e.admitted and not e.finished),
            key=lambda e: (-e.priority, e.queued_at, e.w.uid),
        )
        for e in waiting:
            if e.gpus <= free:
                self._admit(store, e, t)
                free -= e.gpus
                changed.add(e.w.uid)
                continue
            victims = self._victims(e, free)
            if victims:
                for v in victims:
                    self._evict(store, v, e, t)
                    free += v.gpus
                    changed.add(v.w.uid)
                self._admit(store, e, t)
                free -= e.gpus
                changed.add(e.w.uid)
                continue
            msg = ko.pending_message(e.pod_set, FLAVOR, e.gpus - max(0, free))
            conds = {c["type"]: c for c in e.body["status"].get("conditions", [])}
            qr = conds.get("QuotaReserved")
            if qr is None or qr["message"] != msg:
                _set(e.body, "QuotaReserved", "False", t, "Pending", msg)
                changed.add(e.w.uid)
        for uid in sorted(changed):
            e = self.entries[uid]
            store.emit("KueueWorkload", e.body, "MODIFIED")
        self._status(store)

    def _pods_ready(self, e: _Entry, t: float) -> bool:
        live = list(e.w.slots.values())
        conds = {c["type"] for c in e.body["status"].get("conditions", []) if c["status"] == "True"}
        if "PodsReady" in conds or not live or not all(p is not None and p.running_since for p in live):
            return False
        _set(
            e.body,
            "PodsReady",
            "True",
            t,
            "Started",
            "All pods reached readiness and the workload is running",
        )
        return True

    def _victims(self, e: _Entry, free: int) -> list[_Entry]:
        """Return the lowest-priority admitted Workloads (newest first) whose quota makes room, or []."""
        cands = sorted(
            (v for v in self.entries.values() if v.admitted and not v.finished and v.priority < e.priority),
            key=lambda v: (v.priority, -v.queued_at),
        )
        out: list[_Entry] = []
        for v in cands:
            if free >= e.gpus:
                break
            out.append(v)
            free += v.gpus
        return out if free >= e.gpus else []

    def _job(self, store: Store, e: _Entry, suspend: bool) -> None:
        known = store.controllers.get(e.w.uid)
        if known is not None:
            known[1]["spec"]["suspend"] = suspend
            store.emit("Job", known[1], "MODIFIED")

    def _admit(self, store: Store, e: _Entry, t: float) -> None:
        e.admitted = True
        b = e.body
        _set(
            b, "QuotaReserved", "True", t, "QuotaReserved", f"Quota reserved in ClusterQueue {CLUSTER_QUEUE}"
        )
        _set(b, "Admitted", "True", t, "Admitted", "The workload is admitted")
        for kind in ("Evicted", "Preempted"):
            old = next((c for c in b["status"].get("conditions", []) if c["type"] == kind), None)
            if old is not None and old["status"] == "True":
                _set(b, kind, "False", t, "QuotaReserved", "Previously: " + old["message"])
        b["status"]["admission"] = {
            "clusterQueue": CLUSTER_QUEUE,
            "podSetAssignments": [
                {"name": e.pod_set, "count": len(e.w.spec.pods), "flavors": {ko.GPU: FLAVOR}}
            ],
        }
        self._job(store, e, suspend=False)
        e.w.next_create = t

    def _evict(self, store: Store, v: _Entry, by: _Entry, t: float) -> None:
        v.admitted = False
        v.queued_at = t  # requeued: the eviction is its queue timestamp
        b = v.body
        by_job = by.body["metadata"]["labels"][ko.JOB_UID_LABEL]
        msg = ko.preemption_message(
            by.body["metadata"]["uid"], by_job, "InClusterQueue", f"/{CLUSTER_QUEUE}", f"/{CLUSTER_QUEUE}"
        )
        _set(b, "Evicted", "True", t, "Preempted", msg)
        _set(b, "Preempted", "True", t, "InClusterQueue", msg)
        _set(b, "QuotaReserved", "False", t, "Pending", msg)
        _set(b, "Admitted", "False", t, "NoReservation", "The workload has no reservation")
        b["status"].pop("admission", None)
        stats = b["status"].setdefault("schedulingStats", {"evictions": []})
        ev = next((x for x in stats["evictions"] if x["reason"] == "Preempted"), None)
        if ev is None:
            stats["evictions"].append({"reason": "Preempted", "underlyingCause": "", "count": 1})
        else:
            ev["count"] += 1
        self._job(store, v, suspend=True)
        store.stats["preemptions"] += 1
        for p in v.w.slots.values():  # the suspended Job's pods are deleted by the Job controller
            if p is not None and not p.terminating:
                store.terminate(p, t, actual=store.rng.uniform(5.0, 30.0))

    def _status(self, store: Store) -> None:
        if not self.nominal:
            return
        used = self._used()
        st = self.cluster_queue["status"]
        usage = [{"name": FLAVOR, "resources": [{"name": ko.GPU, "total": str(used), "borrowed": "0"}]}]
        pending = sum(1 for e in self.entries.values() if not e.admitted and not e.finished)
        admitted = sum(1 for e in self.entries.values() if e.admitted and not e.finished)
        new = {"flavorsReservation": usage, "flavorsUsage": usage, "pendingWorkloads": pending}
        new |= {"reservingWorkloads": admitted, "admittedWorkloads": admitted}
        if any(st.get(k) != v for k, v in new.items()):
            st.update(new)
            store.emit("ClusterQueue", self.cluster_queue, "MODIFIED")


def controller(store: Store, created: float) -> KueueStandIn:
    return KueueStandIn()
