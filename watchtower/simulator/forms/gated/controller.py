"""The gated form's simulated controllers: Kueue's plain-pod integration, and the webhook half of Volcano's
queue gate. A submission of bare pods (kind `Pod`) is a group of them: with `kueue_queue` a Kueue plain-pod
group, with `volcano_queue` a Volcano-gated group. Shapes and sources in objects.py.

What it does, as the upstream controllers do:
- each pod is created gated (the webhooks: the only time a gate can be added): a Kueue group's pods with
  `kueue.x-k8s.io/admission`, its group label, size annotation and queue label; a Volcano group's pods with
  the opt-in annotation and `scheduling.volcano.sh/queue-allocation-gate`, named in their PodGroup (the
  gangs form makes the PodGroup in the queue, and its vc-scheduler removes the gate: forms/gangs/volcano.py);
- once all of a Kueue group's pods exist, Kueue's pod reconciler makes the group's Workload, queued in the
  Kueue stand-in (forms/kueue/controller.py), which admits it by its ClusterQueue's quota; once admitted,
  the gate is removed from each of the group's pods and kube-scheduler places them.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from watchtower.simulator import controllers
from watchtower.simulator.forms.gated import objects as go
from watchtower.simulator.forms.kueue import objects as ko
from watchtower.simulator.forms.kueue.controller import CLASSES, KueueStandIn
from watchtower.simulator.hooks import FormController, PodDraft

if TYPE_CHECKING:
    from watchtower.simulator.pods import SimWorkload
    from watchtower.simulator.store import Store
    from watchtower.simulator.workloads import PodTemplate


@dataclass
class _KueueGroup:
    w: SimWorkload
    queued: bool = False  # its Workload made and queued in Kueue


class GatedGroups(FormController):
    """Kueue plain-pod groups (gated until their Workload is admitted) and Volcano-gated pods."""

    def __init__(self) -> None:
        self.kueue: KueueStandIn | None = None
        self.groups: dict[str, _KueueGroup] = {}  # Kueue plain-pod groups, by the workload's uid

    def linked(self, forms: Sequence[FormController]) -> None:
        self.kueue = next((f for f in forms if isinstance(f, KueueStandIn)), None)

    def pod(self, store: Store, w: SimWorkload, tpl: PodTemplate, draft: PodDraft) -> None:
        spec = w.spec
        if spec.kind != "Pod":
            return
        if spec.kueue_queue:
            draft.labels.update(
                {
                    go.KUEUE_POD_GROUP_LABEL: spec.name,
                    ko.QUEUE_LABEL: spec.kueue_queue,
                    go.KUEUE_MANAGED_LABEL: "true",
                }
            )
            draft.annotations = {go.KUEUE_POD_GROUP_TOTAL: str(len(spec.pods))}
            draft.gates = (go.KUEUE_ADMISSION_GATE,)
            self.groups.setdefault(w.uid, _KueueGroup(w))
        elif spec.volcano_queue:
            draft.annotations = {go.VOLCANO_GROUP_ANNOTATION: spec.name, go.VOLCANO_QUEUE_GATE: "true"}
            draft.gates = (go.VOLCANO_QUEUE_GATE,)

    def reconcile(self, store: Store, t: float) -> None:
        kueue = self.kueue
        if kueue is None:
            return
        for uid in sorted(self.groups):
            g = self.groups[uid]
            w = g.w
            live = [p for p in w.slots.values() if p is not None]
            if not g.queued and len(live) == len(w.spec.pods):
                self._queue(store, kueue, g, [(p.name, p.uid) for p in live], t)
            elif g.queued and kueue.admitted(w):
                for p in live:
                    store.ungate(p, go.KUEUE_ADMISSION_GATE)

    def _queue(
        self, store: Store, kueue: KueueStandIn, g: _KueueGroup, pods: list[tuple[str, str]], t: float
    ) -> None:
        w, spec = g.w, g.w.spec
        body = go.group_workload(
            group=spec.name,
            namespace=spec.namespace,
            queue=spec.kueue_queue,
            created=t,
            pods=pods,
            template=controllers.pod_template(w, spec.pods[0]),
            priority=CLASSES[spec.kueue_class],
            priority_class=spec.kueue_class,
        )
        kueue.queue(w, body, spec.kueue_class)
        g.queued = True
        store.emit("KueueWorkload", body, "ADDED")

    def gone(self, store: Store, w: SimWorkload) -> None:
        self.groups.pop(w.uid, None)  # its Workload is Kueue's to delete (forms/kueue gone)


def controller(store: Store, created: float) -> GatedGroups:
    return GatedGroups()
