"""A small simulated cluster wired to the real decoder, ingestor, state and queue evaluator."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec
import orjson

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.domain.queue import QueueEvaluator, QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator.cluster import KINDS, SimPod, SimulatedCluster


def small(nodes: int = 1, *, quota: int = 0, seed: int = 3, **kw: Any) -> SimulatedCluster:
    cfg = SimulatorConfig(
        seed=seed,
        nodes=nodes,
        cordoned_nodes=0,
        arrivals_per_hour=0,
        team_gpu_quota=quota,
        teams=["a", "b"],
        warm_start=False,
        dra_nodes=kw.pop("dra_nodes", 0),  # a small cluster has only the nodes a test names
        **kw,
    )
    return SimulatedCluster(cfg)


class Watched:
    """The simulator feeding a ClusterState exactly as the service would: LIST, then every change."""

    def __init__(self, sim: SimulatedCluster) -> None:
        self.sim = sim
        self.state = ClusterState()
        self.ingest = Ingestor(self.state, ObjectDecoder())
        self.evaluator = QueueEvaluator(Settings().queue_policy())
        self.changes: list[tuple[str, str, dict[str, Any]]] = []
        for kind in KINDS:
            self.ingest.list_page(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])

    def step(self, dt: float) -> None:
        self.sim.step(dt)
        for kind, type_, raw in self.sim.drain():
            self.ingest.apply(kind, type_, raw)
            self.changes.append((kind, type_, orjson.loads(raw)))

    def snapshot(self) -> QueueSnapshot:
        return self.evaluator.evaluate(self.state, now=self.sim.now())

    def events(self, reason: str) -> list[dict[str, Any]]:
        return [o for k, t, o in self.changes if k == "Event" and o["reason"] == reason and t != "DELETED"]


def pods(sim: SimulatedCluster, prefix: str) -> list[SimPod]:
    return sorted((p for p in sim.pods.values() if p.name.startswith(prefix)), key=lambda p: p.name)


def one(items: Iterable[Any]) -> Any:
    items = list(items)
    assert len(items) == 1, items
    return items[0]
