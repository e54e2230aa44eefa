"""Real-shaped API objects → decoded records → ClusterState, the way the service feeds the domain."""

from __future__ import annotations

from functools import partial
from typing import Any

import orjson

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config.model import Settings
from watchtower.domain.queue import QueueEvaluator, QueueSnapshot
from watchtower.domain.records import Event, Pod
from watchtower.domain.state import ClusterState, Happening
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
NS = "vision"
DECODER = ObjectDecoder(keep_annotations=frozenset({"watchtower.io/note"}))
# The policy of the default configuration: the tiers, windows and selector the service starts with.
POLICY = Settings().queue_policy()
TIERS = POLICY.tiers
CONTROLLERS = {kind: partial(DECODER.decode, kind) for kind in ("Job", "ReplicaSet", "PaddleJob", "JobSet")}


def raw(obj: dict[str, Any]) -> bytes:
    return orjson.dumps(obj)


def pod(obj: dict[str, Any]) -> Pod:
    return DECODER.decode("Pod", raw(obj))


def event(obj: dict[str, Any]) -> Event:
    return DECODER.decode("Event", raw(obj))


def apply(state: ClusterState, obj: dict[str, Any], *, deleted: bool = False) -> list[Happening]:
    """Apply one API object as a watch event would (ADDED/MODIFIED, or DELETED with the final object)."""
    kind = obj["kind"]
    if kind == "Pod":
        p = pod(obj)
        return state.delete_pod(p.uid, p) if deleted else state.upsert_pod(p)
    if kind == "Event":
        return state.upsert_event(event(obj))
    if kind == "Node":
        state.upsert_node(DECODER.decode("Node", raw(obj)))
    elif kind == "Namespace":
        state.upsert_namespace(DECODER.decode("Namespace", raw(obj)))
    elif kind == "PriorityClass":
        state.upsert_priority_class(DECODER.decode("PriorityClass", raw(obj)))
    elif kind == "ResourceQuota":
        state.control.upsert_quota(DECODER.decode("ResourceQuota", raw(obj)))
    elif kind == "Workload" and obj["apiVersion"].startswith("kueue.x-k8s.io/"):
        w = DECODER.decode("KueueWorkload", raw(obj))
        if deleted:
            state.forms.kueue.delete_workload(w)
            return []
        return state.forms.kueue.upsert_workload(w)
    elif kind == "ClusterQueue":
        state.forms.kueue.upsert_cluster_queue(DECODER.decode("ClusterQueue", raw(obj)))
    elif kind == "LocalQueue":
        state.forms.kueue.upsert_local_queue(DECODER.decode("LocalQueue", raw(obj)))
    elif kind == "WorkloadPriorityClass":
        state.forms.kueue.upsert_priority_class(DECODER.decode("WorkloadPriorityClass", raw(obj)))
    elif kind == "PodGroup" and obj["apiVersion"].startswith("scheduling.volcano.sh/"):
        state.forms.gangs.upsert_volcano_group(DECODER.decode("VolcanoPodGroup", raw(obj)))
    elif kind == "PodGroup":
        state.forms.gangs.upsert_pod_group(DECODER.decode("PodGroup", raw(obj)))
    elif kind == "Workload":
        state.forms.gangs.upsert_workload(DECODER.decode("Workload", raw(obj)))
    elif kind == "Queue":
        state.forms.gangs.upsert_queue(DECODER.decode("VolcanoQueue", raw(obj)))
    elif kind in CONTROLLERS:
        c = CONTROLLERS[kind](raw(obj))
        key = WorkloadKey(c.namespace, c.kind, c.name)
        if deleted:
            state.control.delete_controller(key)
        else:
            state.control.upsert_controller(c)
    return []


def state_of(*objs: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    for obj in objs:
        apply(state, obj)
    return state


def evaluate(state: ClusterState, now: float, *, include_running: bool = False) -> QueueSnapshot:
    return QueueEvaluator(POLICY).evaluate(state, now=now, include_running=include_running)


def paddle_owner(job: str) -> dict[str, Any]:
    return o.owner_ref("PaddleJob", job, api_version=o.PADDLE_API, uid=o.new_uid(f"pj/{job}"))


def job_owner(job: str) -> dict[str, Any]:
    return o.owner_ref("Job", job, api_version="batch/v1", uid=o.new_uid(f"job/{job}"))


def pending_pod(
    name: str, *, created: float = T0, message: str = "", ns: str = NS, **kw: Any
) -> dict[str, Any]:
    conds = [o.unschedulable(created + 1, message)] if message else None
    return o.pod(name=name, namespace=ns, created=created, conditions=conds, **kw)


def running_pod(
    name: str, node: str, *, created: float = T0, ns: str = NS, phase: str = "Running", **kw: Any
) -> dict[str, Any]:
    return o.pod(
        name=name,
        namespace=ns,
        created=created,
        node=node,
        phase=phase,
        conditions=[o.scheduled(created + 10)],
        start_time=created + 11,
        running_since=created + 70,
        **kw,
    )


GPU_FULL = (
    "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
    "4 No preemption victims found for incoming pod."
)
