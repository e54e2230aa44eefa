"""A small cluster built from API-server-shaped objects, and a source that replays them through the port.

`ReplaySource` implements `ClusterSource` by handing prepared objects to the sinks, as the Kubernetes
adapter and the simulator do; the service code under test cannot tell the difference.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec
import orjson

from watchtower.config import Settings
from watchtower.domain.health import KindFreshness, SourceHealth
from watchtower.domain.kinds import WATCHED
from watchtower.ports import ListSink, ObjectSink
from watchtower.simulator import objects as o

NOW = 1_800_000_000.0
HOSTILE = "<script>document.title='pwned'</script><img src=x onerror=\"document.title='pwned'\">"
NO_GPU = (
    "0/4 nodes are available: 4 Insufficient nvidia.com/gpu. preemption: 0/4 nodes are available: "
    "4 No preemption victims found for incoming pod."
)
NOT_HELPFUL = (
    "0/4 nodes are available: 1 node(s) had untolerated taint {gpu: broken}, 3 Insufficient nvidia.com/gpu. "
    "preemption: 0/4 nodes are available: 1 Preemption is not helpful for scheduling, "
    "3 No preemption victims found for incoming pod."
)
ORDER = tuple(k.name for k in WATCHED)  # as a source lists them


class ManualClock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


def raw(obj: dict[str, Any]) -> msgspec.Raw:
    return msgspec.Raw(orjson.dumps(obj))


def paddle_owner(name: str) -> dict[str, Any]:
    return o.owner_ref("PaddleJob", name, api_version=o.PADDLE_API, uid=o.new_uid(f"pj/{name}"))


def settings() -> Settings:
    return Settings()


@dataclass
class Cluster:
    """Objects by kind, in the order a source lists them."""

    objects: dict[str, list[dict[str, Any]]] = field(default_factory=lambda: {k: [] for k in ORDER})

    def add(self, *objs: dict[str, Any]) -> Cluster:
        for obj in objs:
            self.objects[obj["kind"]].append(obj)
        return self

    def all(self) -> list[dict[str, Any]]:
        return [obj for k in ORDER for obj in self.objects[k]]

    def dump(self) -> bytes:
        """The `kubectl get ... -A -o json` List of the same objects (for `watchtower analyze`)."""
        return orjson.dumps(o.object_list(self.all()))


def base_cluster() -> Cluster:
    c = Cluster()
    c.add(o.namespace("vision", team="vision"), o.namespace("nlp", team="language"), o.namespace("ops"))
    c.add(
        o.priority_class("urgent-debug", 1_000_000),
        o.priority_class("online-serving", 900_000),
        o.priority_class("experiment", 500_000),
        o.priority_class("long-training", 300_000, preemption_policy="Never"),
        o.priority_class("batch", 100_000, global_default=True),
    )
    c.add(*(o.node(f"gpu-{i}") for i in range(4)))
    c.add(o.resource_quota("vision", "gpu-quota", hard_gpus=16, used_gpus=16))
    return c


def demo_cluster(now: float = NOW) -> Cluster:
    """Waiting work in every tier, a partial gang, a preemption, a quota refusal and a hostile note."""
    c = base_cluster()
    # Low-tier training fills three nodes.
    for i in range(3):
        c.add(
            o.pod(
                name=f"resnet-worker-{i}",
                namespace="vision",
                created=now - 7200,
                gpus=8,
                priority=100_000,
                priority_class="batch",
                owner=paddle_owner("resnet"),
                node=f"gpu-{i}",
                phase="Running",
                conditions=[o.scheduled(now - 7100)],
                start_time=now - 7100,
                running_since=now - 7000,
            )
        )
    # A critical debug pod waiting past its critical threshold (15 min), with a hostile display note.
    c.add(
        o.pod(
            name="debug-1",
            namespace="ops",
            created=now - 20 * 60,
            gpus=8,
            priority=1_000_000,
            priority_class="urgent-debug",
            annotations={"watchtower.io/note": HOSTILE},
            conditions=[o.unschedulable(now - 20 * 60 + 5, NO_GPU)],
        )
    )
    c.add(
        o.pod(
            name="serve-canary",
            namespace="nlp",
            created=now - 600,
            gpus=8,
            priority=900_000,
            priority_class="online-serving",
            conditions=[o.unschedulable(now - 595, NOT_HELPFUL)],
        )
    )
    # A medium gang: one worker bound on gpu-3, the other waits.
    c.add(
        o.pod(
            name="bert-worker-0",
            namespace="nlp",
            created=now - 1000,
            gpus=4,
            priority=500_000,
            priority_class="experiment",
            owner=paddle_owner("bert"),
            node="gpu-3",
            phase="Running",
            conditions=[o.scheduled(now - 990)],
            start_time=now - 990,
            running_since=now - 900,
        ),
        o.pod(
            name="bert-worker-1",
            namespace="nlp",
            created=now - 1000,
            gpus=8,
            priority=500_000,
            priority_class="experiment",
            owner=paddle_owner("bert"),
            conditions=[o.unschedulable(now - 995, NO_GPU)],
        ),
    )
    c.add(
        o.pod(
            name="sweep-7",
            namespace="vision",
            created=now - 300,
            gpus=2,
            priority=300_000,
            priority_class="long-training",
            preemption_policy="Never",
            conditions=[o.unschedulable(now - 290, NO_GPU)],
        )
    )
    # A preempted victim (its final object, deleted) and the scheduler's event naming the preemptor.
    victim = o.pod(
        name="old-batch-0",
        namespace="vision",
        created=now - 5000,
        gpus=4,
        priority=100_000,
        priority_class="batch",
        node="gpu-3",
        phase="Running",
        conditions=[
            o.scheduled(now - 4900),
            o.condition(
                "DisruptionTarget",
                "True",
                now - 1000,
                reason="PreemptionByScheduler",
                message="Preempted by a pod on node gpu-3",
            ),
        ],
        start_time=now - 4900,
        deletion=now - 1000,
    )
    c.add(victim)  # terminating: it holds its GPUs until it is gone
    preemptor = next(p for p in c.objects["Pod"] if p["metadata"]["name"] == "bert-worker-0")
    c.add(
        o.scheduler_event(
            namespace="vision",
            reason="Preempted",
            note=f"Preempted by pod {preemptor['metadata']['uid']} on node gpu-3",
            regarding=o.pod_ref(victim),
            related=o.pod_ref(preemptor),
            at=now - 1000,
        )
    )
    # A quota refusal: vision's quota is full, its controller cannot create the pods of "detector".
    c.add(
        o.core_event(
            namespace="vision",
            reason="FailedCreate",
            type_="Warning",
            message=(
                'Error creating: pods "detector-worker-0" is forbidden: exceeded quota: gpu-quota, '
                "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, "
                "limited: requests.nvidia.com/gpu=16"
            ),
            involved={
                "kind": "PaddleJob",
                "namespace": "vision",
                "name": "detector",
                "apiVersion": o.PADDLE_API,
            },
            at=now - 400,
            last=now - 60,
            count=5,
            component="paddle-operator",
        )
    )
    return c


class ReplaySource:
    """A `ClusterSource` that lists prepared objects, then plays prepared changes, then stays quiet."""

    def __init__(self, cluster: Cluster, changes: Iterable[tuple[str, str, dict[str, Any]]] = ()) -> None:
        self.cluster = cluster
        self.changes = list(changes)
        self.listed: set[str] = set()
        self.healthy = True
        self.stale_seconds = 0.0
        self.restarts = 0

    async def run(self, *, on_list: ListSink, on_change: ObjectSink) -> None:
        for kind in ORDER:
            on_list(kind, [raw(x) for x in self.cluster.objects[kind]])
            self.listed.add(kind)
            await asyncio.sleep(0)
        for kind, type_, obj in self.changes:
            on_change(kind, type_, orjson.dumps(obj))
        await asyncio.Event().wait()

    def feed_health(self) -> SourceHealth:
        return SourceHealth(
            healthy=self.healthy,
            stale_seconds=self.stale_seconds,
            kinds={
                k: KindFreshness(
                    restarts=self.restarts,
                    stale_seconds=self.stale_seconds,
                    detail={
                        "synced": k in self.listed,
                        "stale_seconds": self.stale_seconds,
                        "restarts": self.restarts,
                    },
                )
                for k in ORDER
            },
        )

    def health(self) -> dict[str, object]:
        return {
            "healthy": self.healthy,
            "stale_seconds": self.stale_seconds,
            "kinds": {
                k: {
                    "synced": k in self.listed,
                    "stale_seconds": self.stale_seconds,
                    "restarts": self.restarts,
                }
                for k in ORDER
            },
        }


def list_everything(watcher: Any, cluster: Cluster) -> None:
    """Feed a whole cluster to a watcher's list sink, kind by kind, as a source's first LIST does."""
    for kind in ORDER:
        watcher.on_list(kind, [raw(x) for x in cluster.objects[kind]])
