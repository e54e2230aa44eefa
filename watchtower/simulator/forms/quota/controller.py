"""The quota form's controller: each team namespace's ResourceQuota of GPUs, its admission of the pods a
controller makes (a refusal is the controller's FailedCreate event, retried with backoff) and its
status.used, written at the end of each tick.

A refusal reads as its controller words it: paddle-operator's own words for a PaddleJob, the child Job's
job-controller for a JobSet's pod (those two kinds' words are still here, not in their forms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from watchtower.simulator import objects as obj
from watchtower.simulator.controllers import child_job
from watchtower.simulator.hooks import FormController
from watchtower.simulator.pods import CONTROLLER

if TYPE_CHECKING:
    from watchtower.simulator.events import EventLog
    from watchtower.simulator.pods import SimWorkload
    from watchtower.simulator.store import Store
    from watchtower.simulator.workloads import PodTemplate

QUOTA_NAME = "gpu-quota"
GPU_KEY = "requests.nvidia.com/gpu"
MAX_BACKOFF = 300.0
NO_QUOTA = 10**9  # the room of a namespace with no quota


class Quotas(FormController):
    """The ResourceQuotas (in the store, `quotas`) and their admission."""

    kinds = frozenset({"ResourceQuota"})

    def __init__(self, store: Store) -> None:
        self.store = store

    def objects(self, kind: str) -> list[dict[str, Any]]:
        return list(self.store.quotas.values())

    def furnish(self, store: Store) -> None:
        hard = store.config.team_gpu_quota
        if hard > 0:
            for ns in store.namespaces:
                store.quotas[ns] = obj.resource_quota(ns, QUOTA_NAME, hard_gpus=hard, used_gpus=0)

    def standing(self) -> list[dict[str, Any]]:
        return list(self.store.quotas.values())

    def room(self, store: Store, namespace: str) -> int:
        q = store.quotas.get(namespace)
        if q is None:
            return NO_QUOTA
        return int(q["status"]["hard"][GPU_KEY]) - quota_used(store, namespace)

    def refuses(
        self, store: Store, log: EventLog, w: SimWorkload, tpl: PodTemplate, name: str, t: float
    ) -> bool:
        ns = w.spec.namespace
        quota = store.quotas.get(ns)
        if quota is None or tpl.gpus <= 0 or w.spec.claim_template:
            return False
        hard = int(quota["status"]["hard"][GPU_KEY])
        used = quota_used(store, ns)
        if used + tpl.gpus <= hard:
            return False
        _refused(store, log, w, tpl, name, used, hard, t)
        return True

    def settle(self, store: Store, t: float) -> None:
        charged = quotas_used(store) if store.quotas else {}
        for ns, q in store.quotas.items():
            used = str(charged.get(ns, 0))
            if q["status"]["used"][GPU_KEY] != used:
                q["status"]["used"][GPU_KEY] = used
                store.emit("ResourceQuota", q, "MODIFIED")


def quota_used(store: Store, ns: str) -> int:
    """Return the GPUs a namespace's quota charges: every pod not in a terminal phase, terminating ones too."""
    return sum(p.gpus for p in store.pods.values() if p.namespace == ns and not p.terminal)


def quotas_used(store: Store) -> dict[str, int]:
    """Return quota_used of every namespace with a pod, in one pass over the pods (run every tick)."""
    out: dict[str, int] = {}
    for p in store.pods.values():
        if p.gpus and not p.terminal:
            out[p.namespace] = out.get(p.namespace, 0) + p.gpus
    return out


def _refused(
    store: Store,
    log: EventLog,
    w: SimWorkload,
    tpl: PodTemplate,
    name: str,
    used: int,
    hard: int,
    t: float,
) -> None:
    store.stats["quota_refusals"] += 1
    if w.refused_since is None:
        w.refused_since = t
    w.next_create = t + w.backoff
    w.backoff = min(MAX_BACKOFF, w.backoff * 2)
    if w.spec.kind == "Pod":
        w.done = True  # `kubectl create` got the error; nothing retries a bare pod
        return
    reason = "FailedCreate"
    msg = (
        f'Error creating: pods "{w.spec.name}-" is forbidden: exceeded quota: {QUOTA_NAME}, '
        f"requested: {GPU_KEY}={tpl.gpus}, used: {GPU_KEY}={used}, limited: {GPU_KEY}={hard}"
    )
    if w.spec.kind == "PaddleJob":
        # paddle-operator records its own words, not the API's error (controllers/paddlejob_controller.go
        # createResource): the quota is read from the ResourceQuota itself.
        reason, msg = "Create", f"create failed Pod {name}"
    ev = w.failed_create
    if ev is not None and ev["message"] == msg and log.current(ev):
        ev["count"] += 1
        ev["lastTimestamp"] = obj.ts(t)
        log.emit(ev, "MODIFIED")
        return
    involved, component = w.ref, CONTROLLER[w.spec.kind][0]
    child = child_job(store, w, tpl)
    if child is not None:  # the child Job's controller is refused, on the child Job
        cm = child["metadata"]
        involved = {"kind": "Job", "namespace": cm["namespace"], "name": cm["name"], "uid": cm["uid"]}
        involved["apiVersion"], component = "batch/v1", "job-controller"
        msg = msg.replace(f'"{w.spec.name}-"', f'"{cm["name"]}-"')
    w.failed_create = log.new_core(
        involved, reason=reason, message=msg, type_="Warning", component=component, t=t
    )


def controller(store: Store, created: float) -> Quotas:
    return Quotas(store)
