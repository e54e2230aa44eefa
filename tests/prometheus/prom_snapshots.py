"""Queue snapshots built the real way: API-shaped objects → decoder → ClusterState → QueueEvaluator."""

from __future__ import annotations

import json

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config.model import Settings
from watchtower.domain.queue import QueueEvaluator, QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator import objects as o


def snapshot_waiting(
    now: float, *, namespace: str, name: str, priority: int, waited: float, priority_class: str = ""
) -> QueueSnapshot:
    """Return the queue at `now` with one PaddleJob pod pending for `waited` seconds for want of GPUs."""
    state = ClusterState()
    ing = Ingestor(state, ObjectDecoder())
    ing.apply("Node", "ADDED", json.dumps(o.node("node-1", gpus=8)).encode())
    owner = o.owner_ref("PaddleJob", name, api_version="batch.paddlepaddle.org/v1", uid=f"uid-{name}")
    pod = o.pod(
        name=f"{name}-worker-0",
        namespace=namespace,
        created=now - waited,
        gpus=8,
        priority=priority,
        priority_class=priority_class or None,
        owner=owner,
        conditions=[
            o.unschedulable(now - waited + 1, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
        ],
    )
    ing.apply("Pod", "ADDED", json.dumps(pod).encode())
    return QueueEvaluator(Settings().queue_policy()).evaluate(state, now=now)


def snapshot_holding_and_waiting(
    now: float,
    *,
    holders: list[tuple[str, str, int, int]],
    waiting: list[tuple[str, str, int]],
) -> QueueSnapshot:
    """Return the queue at `now`, running workloads included (as the watch loop evaluates it).

    `holders`: (namespace, PaddleJob name, GPUs, priority) running on node-1; `waiting`: (namespace,
    PaddleJob name, priority), each a pod pending for 600 s for want of GPUs."""
    state = ClusterState()
    ing = Ingestor(state, ObjectDecoder())
    ing.apply("Node", "ADDED", json.dumps(o.node("node-1", gpus=8)).encode())
    for ns, name, gpus, priority in holders:
        owner = o.owner_ref("PaddleJob", name, api_version="batch.paddlepaddle.org/v1", uid=f"uid-{name}")
        pod = o.pod(
            name=f"{name}-worker-0",
            namespace=ns,
            created=now - 7200,
            gpus=gpus,
            priority=priority,
            owner=owner,
            node="node-1",
            phase="Running",
            conditions=[o.scheduled(now - 7100)],
            start_time=now - 7100,
            running_since=now - 7000,
        )
        ing.apply("Pod", "ADDED", json.dumps(pod).encode())
    for ns, name, priority in waiting:
        owner = o.owner_ref("PaddleJob", name, api_version="batch.paddlepaddle.org/v1", uid=f"uid-{name}")
        pod = o.pod(
            name=f"{name}-worker-0",
            namespace=ns,
            created=now - 600,
            gpus=8,
            priority=priority,
            owner=owner,
            conditions=[
                o.unschedulable(now - 599, "0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
            ],
        )
        ing.apply("Pod", "ADDED", json.dumps(pod).encode())
    return QueueEvaluator(Settings().queue_policy()).evaluate(state, now=now, include_running=True)
