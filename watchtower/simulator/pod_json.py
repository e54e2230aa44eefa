"""A simulated pod rendered as the API server serves it: what a watcher of the simulator decodes."""

from __future__ import annotations

from typing import Any

import orjson

from watchtower.simulator import objects as obj
from watchtower.simulator.forms.dra import objects as dra_objects
from watchtower.simulator.pods import SimPod


def render(p: SimPod, host_ip: str) -> bytes:
    """Return the pod's JSON; `host_ip` is its node's InternalIP (unread for a pod not bound)."""
    conds = [c for c in (p.sched_cond, p.disruption) if c is not None]
    tpl = p.template
    body = obj.pod(
        name=p.name,
        namespace=p.namespace,
        created=p.created,
        uid=p.uid,
        gpus=p.gpus,
        cpu=tpl.cpu,
        memory=tpl.memory,
        priority=p.priority,
        priority_class=p.priority_class,
        preemption_policy=p.preemption_policy,
        image=tpl.image,
        labels=p.labels,
        owner=p.owner,
        node=p.node or None,
        phase=p.phase,
        conditions=conds,
        start_time=p.start_time,
        running_since=p.running_since,
        deletion=p.deletion,
        grace=p.grace,
        nominated_node=p.nominated or None,
        resource_version=str(p.resource_version),
    )
    if p.workload.spec.claim_template:
        dra_objects.claims_in_template(body, p.workload.spec.claim_template)
    if p.group:
        body["spec"]["schedulingGroup"] = {"podGroupName": p.group}
    if p.scheduler:
        body["spec"]["schedulerName"] = p.scheduler
    if p.gates:
        body["spec"]["schedulingGates"] = [{"name": g} for g in p.gates]
    if p.annotations:
        body["metadata"]["annotations"] = {**body["metadata"].get("annotations", {}), **p.annotations}
    st = body["status"]
    if p.claim is not None:  # written by the resourceclaim controller once it made the claim
        name = p.claim["metadata"]["name"]
        st["resourceClaimStatuses"] = [{"name": dra_objects.POD_CLAIM, "resourceClaimName": name}]
    if p.node:
        st["hostIP"] = host_ip
        st["podIP"] = p.ip
    state: dict[str, Any] | None = None
    if p.node and p.running_since is None and not p.terminal:
        state = {"waiting": {"reason": "ContainerCreating"}}
    if p.terminal and p.running_since is not None:
        state = {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": obj.ts(p.running_since),
                "finishedAt": obj.ts(p.finished_at),
            }
        }
    if state is not None:  # obj.pod writes only a running container's status
        st["containerStatuses"] = [
            {
                "name": "main",
                "image": tpl.image,
                "imageID": "",
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": state,
            }
        ]
    return orjson.dumps(body)
