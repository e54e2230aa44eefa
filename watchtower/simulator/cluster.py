"""A seeded, time-accelerated GPU cluster that speaks the API server's object shapes.

`SimulatedCluster` is a `ClusterSource`: it LISTs every kind, then streams ADDED/MODIFIED/DELETED JSON as its
simulated clock advances. It composes the one object store (store.py: every kind's objects, the
resourceVersion every write bumps, the changes a watcher drains) and what acts on it each tick: the
controllers (controllers.py), kube-scheduler's decisions applied (binding.py, deciding in scheduler.py),
the kubelet, completion and garbage collection (lifecycle.py), the Events (events.py), and each queue
form's controller (forms/<name>/controller.py: quota admission, Volcano, Kueue, the DRA driver...),
found by the forms' registry and called through its hooks (hooks.py), never by name. Tests drive it with
`step(dt)` and never need real time. What runs before its start (the demo's warm start, in
watchtower/commands/demo/warm.py) is a `Prelude` it is given, not something it knows.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

import orjson

from watchtower.config.model import SimulatorConfig
from watchtower.domain.forms.registry import WATCHED
from watchtower.domain.health import SourceHealth
from watchtower.ports import ListSink, ObjectSink
from watchtower.simulator import controllers, exporter, lifecycle
from watchtower.simulator import objects as obj
from watchtower.simulator.binding import KubeScheduler
from watchtower.simulator.events import EventLog
from watchtower.simulator.hooks import FormController, form_controllers
from watchtower.simulator.pods import CONTROLLER, SimPod, SimWorkload
from watchtower.simulator.store import Store
from watchtower.simulator.workloads import (
    PRIORITY_CLASSES,
    WorkloadGenerator,
    WorkloadSpec,
    team_namespace,
)

__all__ = ["DEFAULT_START", "KINDS", "Prelude", "SimPod", "SimulatedCluster"]

KINDS = tuple(k.name for k in WATCHED)
# Served (installed CRDs with no objects yet), but the simulator makes none of these kinds.
UNSIMULATED: frozenset[str] = frozenset()
DEFAULT_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a fixed epoch keeps runs comparable
MAX_SUBSTEP = 10.0  # simulated seconds per internal tick: coarse steps are cut into these
F = TypeVar("F", bound=FormController)


class Prelude(Protocol):
    """What a cluster plays before its start: objects it needs from the first LIST, then `lead` simulated
    seconds of the ordinary simulation, ending at the start. Nothing of it is in the change feed."""

    lead: float

    def furnish(self, sim: SimulatedCluster) -> None:
        """Add to the cluster what must exist before its first objects get their resourceVersions."""

    def play(self, sim: SimulatedCluster) -> None:
        """Submit and step the cluster from `lead` seconds before its start up to the start."""


class SimulatedCluster:
    """A seeded cluster on a simulated clock; `step(dt)` advances it, `run()` streams it in real time.

    It plays only the `prelude` it is given: `config.warm_start` is read by the builder that gives one
    (watchtower/commands/demo/warm.py `demo_cluster`)."""

    def __init__(
        self,
        config: SimulatorConfig | None = None,
        *,
        start: float | None = None,
        tick: float = 0.2,
        prelude: Prelude | None = None,
    ) -> None:
        cfg = config or SimulatorConfig()
        self.tick = tick  # real seconds between steps in `run`
        self.store = store = Store(cfg, start if start is not None else DEFAULT_START)
        created = store.now() - 90 * 86400
        self.forms = form_controllers(store, created)  # in the registry's order, which their hooks run in
        for f in self.forms:
            f.linked(self.forms)
        self._served = {kind: f for f in self.forms for kind in f.kinds}
        self.log = EventLog(store)
        self.scheduler = KubeScheduler(store, self.log, self.forms)
        store.nodes = self._make_nodes()
        for f in self.forms:
            f.add_nodes(store, created)
        store.namespaces = {team_namespace(t): obj.namespace(team_namespace(t), team=t) for t in cfg.teams}
        store.priority_classes = [
            obj.priority_class(
                c.name, c.value, preemption_policy=c.preemption_policy, description=c.description
            )
            for c in PRIORITY_CLASSES
        ]
        for f in self.forms:
            f.furnish(store)
        if prelude is not None:
            prelude.furnish(self)
        for o in [
            *store.namespaces.values(),
            *store.priority_classes,
            *store.nodes.values(),
            *(o for f in self.forms for o in f.standing()),
        ]:
            store.stamp(o)
        self.generator = WorkloadGenerator(store.rng, list(cfg.teams), cfg.gpus_per_node)
        self._next_arrival = store.now() + self.generator.gap(cfg.arrivals_per_hour)
        self._scripted: list[tuple[float, Callable[[], WorkloadSpec]]] = []
        if prelude is not None:
            begin = store.now()
            store.set_now(begin - prelude.lead)
            prelude.play(self)  # the ordinary simulation, up to `begin`
            self._next_arrival = begin + self.generator.gap(cfg.arrivals_per_hour)
        store.drain()  # what happened before anyone listens is in the first LIST

    # ---- what the store holds, as tests and the exporter read it ----------------------------------

    def form(self, cls: type[F]) -> F:
        """Return the form controller of class `cls` (e.g. forms.kueue.controller.KueueStandIn)."""
        for f in self.forms:
            if isinstance(f, cls):
                return f
        raise LookupError(f"the simulator runs no {cls.__name__}")

    @property
    def config(self) -> SimulatorConfig:
        return self.store.config

    @property
    def rng(self) -> random.Random:
        return self.store.rng

    @property
    def pods(self) -> dict[str, SimPod]:
        return self.store.pods

    @property
    def workloads(self) -> list[SimWorkload]:
        return self.store.workloads

    @property
    def nodes(self) -> dict[str, dict[str, Any]]:
        return self.store.nodes

    @property
    def namespaces(self) -> dict[str, dict[str, Any]]:
        return self.store.namespaces

    @property
    def quotas(self) -> dict[str, dict[str, Any]]:
        return self.store.quotas

    @property
    def stats(self) -> dict[str, int]:
        return self.store.stats

    def now(self) -> float:
        """Return the simulated time, epoch seconds."""
        return self.store.now()

    def live_pods(self) -> Iterator[SimPod]:
        return self.store.live_pods()

    def node_ip(self, name: str) -> str:
        return self.store.node_ip(name)

    # ---- setup ------------------------------------------------------------------------------------

    def _make_nodes(self) -> dict[str, dict[str, Any]]:
        cfg = self.config
        created = self.store.now() - 90 * 86400
        out = {}
        cordoned = min(cfg.cordoned_nodes, cfg.nodes - 1)
        for i in range(cfg.nodes):
            name = f"gpu-node-{i:03d}"
            n = obj.node(
                name,
                gpus=cfg.gpus_per_node,
                cpu=str(16 * cfg.gpus_per_node),
                memory=f"{96 * cfg.gpus_per_node}Gi",
                unschedulable_=i >= cfg.nodes - cordoned,
                created=created,
            )
            n["status"]["addresses"] = [
                {"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250 + 1}"},
                {"type": "Hostname", "address": name},
            ]
            out[name] = n
        return out

    # ---- submissions ------------------------------------------------------------------------------

    def submit(self, spec: WorkloadSpec, *, at: float | None = None) -> SimWorkload:
        """Create a workload now (its controller creates the pods on the next tick), or schedule it for `at`."""
        now = self.store.now()
        if at is not None and at > now:
            self.script(at, lambda: spec)
            return SimWorkload(spec, "", at)
        w = SimWorkload(spec, self.store.new_uid(f"wl/{spec.name}"), now)
        w.slots = {t.name: None for t in spec.pods}
        w.next_create = now
        self.store.workloads.append(w)
        for f in self.forms:
            f.submitted(self.store, w)
        controllers.created(self.store, self.forms, w)
        return w

    def script(self, at: float, make: Callable[[], WorkloadSpec]) -> None:
        """Submit what `make` returns at simulated time `at`: a scripted moment decided when it comes."""
        self._scripted.append((at, make))
        self._scripted.sort(key=lambda x: x[0])

    def quota_room(self, namespace: str) -> int:
        """Return the GPUs a namespace's quota still admits (a large number when it has none)."""
        return min(f.room(self.store, namespace) for f in self.forms)

    # ---- the ClusterSource port -------------------------------------------------------------------

    def list_objects(self, kind: str) -> list[bytes]:
        """Return the current objects of a kind as the API server would list them."""
        store = self.store
        if kind == "Namespace":
            items: list[dict[str, Any]] = list(store.namespaces.values())
        elif kind == "PriorityClass":
            items = store.priority_classes
        elif kind == "Node":
            items = list(store.nodes.values())
        elif kind == "Pod":
            return [store.render(p) for p in store.pods.values()]
        elif kind == "Event":
            items = list(self.log.events.values())
        elif kind in CONTROLLER:
            items = [body for k, body in store.controllers.values() if k == kind]
            if kind == "Job":
                items += [j for jobs in store.child_jobs.values() for j in jobs]
        elif kind in self._served:
            items = self._served[kind].objects(kind)
        elif kind in UNSIMULATED:
            items = []
        else:
            raise ValueError(f"the simulator has no {kind!r} objects")
        return [orjson.dumps(i) for i in items]

    def drain(self) -> list[tuple[str, str, bytes]]:
        """Return and forget the changes made since the last drain: (kind, ADDED|MODIFIED|DELETED, JSON)."""
        return self.store.drain()

    async def run(self, *, on_list: ListSink, on_change: ObjectSink) -> None:
        """List every kind, then advance in real time (`speed` simulated seconds per second) until cancelled."""
        import msgspec

        self.store.drain()
        for kind in KINDS:
            on_list(kind, [msgspec.Raw(b) for b in self.list_objects(kind)])
        server = None
        if self.config.metrics_port:
            server = await self.serve_metrics("127.0.0.1", self.config.metrics_port)
        loop = asyncio.get_running_loop()
        last = loop.time()
        try:
            while True:
                await asyncio.sleep(self.tick)
                t = loop.time()
                self.step((t - last) * self.config.speed)
                last = t
                for kind, type_, raw in self.drain():
                    on_change(kind, type_, raw)
        finally:
            if server is not None:
                await server.close()

    def health(self) -> dict[str, object]:
        return {
            "healthy": True,
            "source": "simulator",
            "simulated_now": self.store.now(),
            "speed": self.config.speed,
            "seed": self.config.seed,
            "resource_version": self.store.resource_version,
            "pods": len(self.store.pods),
            **self.store.stats,
        }

    def feed_health(self) -> SourceHealth:
        # Nothing is ever stale in a simulation: the feed is the cluster itself.
        detail = {k: v for k, v in self.health().items() if isinstance(v, str | int | float | bool | None)}
        return SourceHealth(healthy=True, detail=detail)

    # ---- metrics ----------------------------------------------------------------------------------

    def render_metrics(self, now: float | None = None, *, which: str = "all") -> str:
        return exporter.render_metrics(self.store, self.store.now() if now is None else now, which=which)

    async def serve_metrics(self, host: str = "127.0.0.1", port: int = 0) -> Any:
        """Serve DCGM- and kube-state-metrics-shaped series over HTTP; return the server (`.port`, `close()`)."""
        return await exporter.serve_metrics(
            lambda which: self.render_metrics(which=which), host=host, port=port
        )

    # ---- time -------------------------------------------------------------------------------------

    def step(self, dt: float) -> None:
        """Advance the simulated clock by `dt` seconds, in ticks of at most MAX_SUBSTEP."""
        store = self.store
        end = store.now() + max(0.0, dt)
        while store.now() < end:
            t = min(end, store.now() + MAX_SUBSTEP)
            self._tick(t - store.now())
        store.set_now(end)

    def _tick(self, dt: float) -> None:
        store = self.store
        t = store.now() + dt
        store.set_now(t)
        self._arrivals(t)
        lifecycle.kubelet(store, self.log, t)
        lifecycle.progress(store, self.forms, t, dt)
        controllers.reconcile(store, self.log, self.forms, t)
        for f in self.forms:
            f.reconcile(store, t)
        self.scheduler.schedule(t)
        changed, store.pods_changed = store.pods_changed, set()
        for f in self.forms:
            f.pods_changed(store, t, changed)
        for f in self.forms:
            f.settle(store, t)
        self.log.expire(t)

    def _arrivals(self, t: float) -> None:
        while self._scripted and self._scripted[0][0] <= t:
            _, make = self._scripted.pop(0)
            self.submit(make())
        while self._next_arrival <= t:
            self.submit(self.generator.any())
            self._next_arrival += self.generator.gap(self.config.arrivals_per_hour)
