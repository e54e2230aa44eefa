"""Object fixtures → a real queue snapshot, and a clock the test moves."""

from __future__ import annotations

from typing import Any

import orjson

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config import settings_from_mapping
from watchtower.config.model import Settings
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.services.analyze import analyze
from watchtower.simulator import objects as o

T0 = 1_760_000_000.0
SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSwMfKQ9r8GKYo="
CLASSES = {
    "critical": (1_000_000, "urgent-debug"),
    "high": (900_000, "online-serving"),
    "medium": (500_000, "experiment"),
    "low": (100_000, "batch"),
}
NO_FIT = (
    "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
    "4 No preemption victims found for incoming pod."
)


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def settings(alerting: dict[str, Any], **extra: Any) -> Settings:
    return settings_from_mapping({"alerting": alerting, **extra}, env={})


def pending(
    name: str, tier: str, created: float, *, ns: str = "team-a", gpus: int = 8, note: str = ""
) -> dict:
    prio, pclass = CLASSES[tier]
    return o.pod(
        name=name,
        namespace=ns,
        created=created,
        gpus=gpus,
        priority=prio,
        priority_class=pclass,
        annotations={"watchtower.io/note": note} if note else None,
        conditions=[o.unschedulable(created + 1, NO_FIT)],
    )


def snapshot(objs: list[dict], at: float, s: Settings) -> tuple[QueueSnapshot, ClusterState]:
    data = orjson.dumps(o.object_list([o.node(f"n{i}") for i in range(4)] + objs))
    dec = ObjectDecoder(keep_annotations=frozenset({"watchtower.io/note"}))
    a = analyze(data, policy=s.queue_policy(), decoder=dec, at=at)
    return a.snapshot, a.state


# ---- cluster state built object by object, as the watch applies them ------------------------------------

DECODER = ObjectDecoder(keep_annotations=frozenset({"watchtower.io/note"}))


def apply(state: ClusterState, obj: dict, *, deleted: bool = False) -> None:
    """Apply a Pod, Node or Event as a watch event would (ADDED/MODIFIED, or DELETED with the final object)."""
    data = orjson.dumps(obj)
    if obj["kind"] == "Pod":
        p = DECODER.decode("Pod", data)
        if deleted:
            state.delete_pod(p.uid, p)
        else:
            state.upsert_pod(p)
    elif obj["kind"] == "Node":
        state.upsert_node(DECODER.decode("Node", data))
    elif obj["kind"] == "Event":
        state.upsert_event(DECODER.decode("Event", data))
    else:
        raise ValueError(f"no need for {obj['kind']} here")


def state_of(*objs: dict) -> ClusterState:
    state = ClusterState()
    for obj in objs:
        apply(state, obj)
    return state


def paddle_owner(job: str) -> dict:
    return o.owner_ref("PaddleJob", job, api_version=o.PADDLE_API, uid=o.new_uid(f"pj/{job}"))


def pending_pod(name: str, *, ns: str, created: float, message: str, **kw: Any) -> dict:
    return o.pod(
        name=name, namespace=ns, created=created, conditions=[o.unschedulable(created + 1, message)], **kw
    )


def running_pod(name: str, node: str, *, ns: str, created: float, **kw: Any) -> dict:
    return o.pod(
        name=name,
        namespace=ns,
        created=created,
        node=node,
        phase="Running",
        conditions=[o.scheduled(created + 10)],
        start_time=created + 11,
        running_since=created + 70,
        **kw,
    )
