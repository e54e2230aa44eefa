"""paddle-operator's status write-back: a PaddleJob's status follows its pods (syncCurrentStatus).

The PaddleJob object, its pods and its quota refusals' words are still made by the core's controllers.py
with the other controllers' objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from watchtower.simulator.forms.paddle.objects import paddle_status
from watchtower.simulator.hooks import FormController

if TYPE_CHECKING:
    from watchtower.simulator.store import Store


class PaddleJobs(FormController):
    """Writes the status of the PaddleJobs whose pods changed."""

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
