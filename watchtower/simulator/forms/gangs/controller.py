"""The gangs form's simulated controllers: the 1.36 Job controller's Workload and PodGroup for a gang Job
(WorkloadWithJob), and the Volcano stand-in (volcano.py) with the PodGroup paddle-operator makes for a
PaddleJob that names a Volcano queue.

kube-scheduler's placing of an upstream gang (all or nothing, its PodGroup's condition) is its
GangScheduling plugin, in binding.py; the upstream objects are in the store (`gang_workloads`,
`pod_groups`), where that plugin reads them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from watchtower.simulator.forms.gangs import objects as grp
from watchtower.simulator.forms.gangs import volcano_objects as vo
from watchtower.simulator.forms.gangs.volcano import VolcanoScheduler
from watchtower.simulator.hooks import Binder, FormController, PodDraft

if TYPE_CHECKING:
    from watchtower.simulator.events import EventLog
    from watchtower.simulator.pods import SimWorkload
    from watchtower.simulator.scheduler import Scheduler
    from watchtower.simulator.store import Store
    from watchtower.simulator.workloads import PodTemplate


class Gangs(FormController):
    """Upstream gang Jobs' Workloads and PodGroups, and Volcano's queues and groups (`volcano`)."""

    kinds = frozenset({"Workload", "PodGroup", "VolcanoPodGroup", "VolcanoQueue"})

    def __init__(self, store: Store, created: float) -> None:
        self.store = store
        self.volcano = VolcanoScheduler(created)

    def objects(self, kind: str) -> list[dict[str, Any]]:
        if kind == "Workload":
            return list(self.store.gang_workloads.values())
        if kind == "PodGroup":
            return list(self.store.pod_groups.values())
        return list(self.volcano.objects(kind))

    def shape(self, w: SimWorkload, body: dict[str, Any]) -> None:
        spec = w.spec
        if spec.kind == "PaddleJob" and spec.volcano_queue:
            # paddlejob_types.go SchedulingPolicy; the CRD's Collective mode
            body["spec"]["schedulingPolicy"] = {
                "minAvailable": len(spec.pods),
                "queue": spec.volcano_queue,
                "priorityClass": spec.priority_class,
            }
            body["status"]["mode"] = "Collective"
        if spec.kind == "Job" and spec.pod_group:
            # WorkloadWithJob gang-schedules Indexed Jobs with parallelism = completions
            body["spec"]["completionMode"] = "Indexed"

    def created(self, store: Store, w: SimWorkload, body: dict[str, Any] | None) -> None:
        if w.spec.pod_group:
            _gang_objects(store, w)
        if w.spec.volcano_queue:  # paddle-operator's constructPodGroup, before any pod
            group = self.volcano.pod_group(w)
            if w.spec.kind == "Pod":  # bare pods' group is their user's: nothing owns it
                del group["metadata"]["ownerReferences"]
            store.emit("VolcanoPodGroup", group, "ADDED")

    def pod(self, store: Store, w: SimWorkload, tpl: PodTemplate, draft: PodDraft) -> None:
        spec = w.spec
        if spec.pod_group:  # an Indexed Job's pods: `<job>-<index>-<suffix>`, in the group `<job>-0`
            draft.name = f"{spec.name}-{draft.index}-{store.suffix()}"
            if spec.kind == "Job":
                draft.labels["batch.kubernetes.io/job-completion-index"] = str(draft.index)
            draft.group = f"{spec.name}-0"
        if spec.volcano_queue:  # paddle-operator's pods for a Volcano PodGroup
            draft.scheduler = vo.SCHEDULER
            draft.annotations = vo.pod_annotations(spec.name, tpl.role, spec.volcano_queue)

    def admits(self, w: SimWorkload) -> bool:
        # paddle-operator requeues until its PodGroup is Inqueue or Running
        # Bare pods in a Volcano queue are made at once, gated until the queue has room (forms/gated).
        return not w.spec.volcano_queue or w.spec.kind == "Pod" or self.volcano.admits(w)

    def session(
        self, store: Store, log: EventLog, binder: Binder, ledger: Callable[[], Scheduler], t: float
    ) -> None:
        self.volcano.session(store, log, binder, ledger, t)

    def gone(self, store: Store, w: SimWorkload) -> None:
        # The garbage collector takes what the Job owned.
        for kind, held in (("PodGroup", store.pod_groups), ("Workload", store.gang_workloads)):
            owned = held.pop(w.uid, None)
            if owned is not None:
                store.emit(kind, owned, "DELETED")
        volcano_group = self.volcano.forget(w)
        if volcano_group is not None:
            store.emit("VolcanoPodGroup", volcano_group, "DELETED")


def _gang_objects(store: Store, w: SimWorkload) -> None:
    """Make a gang Job's Workload and PodGroup before any of its pods, as the 1.36 Job controller does."""
    spec, n = w.spec, len(w.spec.pods)
    wl = grp.gang_workload(
        name=spec.name, namespace=spec.namespace, created=w.created, min_count=n, job_uid=w.uid
    )
    pg = grp.pod_group(
        name=f"{spec.name}-0",
        namespace=spec.namespace,
        created=w.created,
        min_count=n,
        job=spec.name,
        job_uid=w.uid,
    )
    store.gang_workloads[w.uid], store.pod_groups[w.uid] = wl, pg
    store.emit("Workload", wl, "ADDED")
    store.emit("PodGroup", pg, "ADDED")


def controller(store: Store, created: float) -> Gangs:
    return Gangs(store, created)
