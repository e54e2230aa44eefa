"""The PaddleJob form's controller: the PaddleJob object, and paddle-operator's status write-back (a
PaddleJob's status follows its pods: syncCurrentStatus).

Its pods are named by their templates and its quota refusals are in paddle-operator's words, still in the
core (controllers.py `_create_pod`, `_refused`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from watchtower.simulator import objects as obj
from watchtower.simulator.controllers import templates_by_role
from watchtower.simulator.forms.paddle.objects import paddle_status
from watchtower.simulator.hooks import FormController, PodDraft

if TYPE_CHECKING:
    from watchtower.simulator.pods import SimWorkload
    from watchtower.simulator.store import Store
    from watchtower.simulator.workloads import PodTemplate


class PaddleJobs(FormController):
    """Makes the PaddleJobs and writes the status of those whose pods changed."""

    def build(self, w: SimWorkload) -> dict[str, Any] | None:
        if w.spec.kind != "PaddleJob":
            return None
        return obj.paddle_job_object(
            name=w.spec.name,
            namespace=w.spec.namespace,
            created=w.created,
            uid=w.uid,
            roles=templates_by_role(w),
        )

    def pod(self, store: Store, w: SimWorkload, tpl: PodTemplate, draft: PodDraft) -> None:
        if w.spec.kind == "PaddleJob":
            draft.labels.update({"paddle-res-name": draft.name, "paddle-res-type": tpl.role})

    def pods_changed(self, store: Store, t: float, changed: set[str]) -> None:
        """Write the status of each PaddleJob whose pods `changed`, when it differs (the operator's
        syncCurrentStatus)."""
        for w in store.workloads:
            known = store.controllers.get(w.uid) if w.uid in changed else None
            if known is None or known[0] != "PaddleJob":
                continue
            body = known[1]
            replicas: dict[str, int] = {}
            for tpl in w.spec.pods:
                replicas[tpl.role] = replicas.get(tpl.role, 0) + 1
            pods = [(p.template.role, p.phase) for p in w.slots.values() if p is not None]
            status = paddle_status(replicas, pods, old=body["status"], now=t)
            if status != body["status"]:
                body["status"] = status
                store.emit("PaddleJob", body, "MODIFIED")


def controller(store: Store, created: float) -> PaddleJobs:
    return PaddleJobs()
