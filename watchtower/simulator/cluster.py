"""A seeded, time-accelerated GPU cluster that speaks the API server's object shapes.

`SimulatedCluster` is a `ClusterSource`: it LISTs every kind, then streams ADDED/MODIFIED/DELETED JSON as its
simulated clock advances. It holds the one object store: every kind's objects, the resourceVersion every
write bumps, and the changes a watcher drains. What acts on the store each tick is beside it: the controllers
and quota admission (sim/controllers.py), kube-scheduler's decisions applied (sim/binding.py, deciding in
sim/scheduler.py), the Volcano stand-in (sim/volcano.py), the kubelet, completion and garbage collection
(sim/lifecycle.py) and the Events (sim/events.py). Tests drive it with `step(dt)` and never need real time.
"""

from __future__ import annotations

import asyncio
import random
import string
from collections.abc import Callable, Iterator
from typing import Any

import orjson

from watchtower.config.model import SimulatorConfig
from watchtower.domain.health import SourceHealth
from watchtower.domain.kinds import WATCHED
from watchtower.ports import ListSink, ObjectSink
from watchtower.simulator import binding, controllers, exporter, lifecycle, pod_json, story, warm
from watchtower.simulator import objects as obj
from watchtower.simulator.controllers import GPU_KEY, QUOTA_NAME, quota_used, quotas_used
from watchtower.simulator.dra import KINDS as DRA_KIND_NAMES
from watchtower.simulator.dra import DraDriver
from watchtower.simulator.events import EventLog
from watchtower.simulator.kueue import KueueStandIn
from watchtower.simulator.pods import CONTROLLER, SimPod, SimWorkload
from watchtower.simulator.volcano import VolcanoScheduler
from watchtower.simulator.workloads import (
    PRIORITY_CLASSES,
    WorkloadGenerator,
    WorkloadSpec,
    team_namespace,
)

__all__ = ["DEFAULT_START", "GPU_KEY", "KINDS", "QUOTA_NAME", "SimPod", "SimulatedCluster"]

KINDS = tuple(k.name for k in WATCHED)
# Served (installed CRDs with no objects yet), but the simulator makes none of these kinds.
UNSIMULATED: frozenset[str] = frozenset()
DRA_KINDS = frozenset(DRA_KIND_NAMES)  # served empty while the cluster has no DRA node
DEFAULT_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a fixed epoch keeps runs comparable
MAX_SUBSTEP = 10.0  # simulated seconds per internal tick: coarse steps are cut into these


class SimulatedCluster:
    """A seeded cluster on a simulated clock; `step(dt)` advances it, `run()` streams it in real time."""

    def __init__(
        self,
        config: SimulatorConfig | None = None,
        *,
        start: float | None = None,
        warm_start: bool | None = None,
        tick: float = 0.2,
    ) -> None:
        self.config = cfg = config or SimulatorConfig()
        self.rng = random.Random(cfg.seed)
        self.tick = tick  # real seconds between steps in `run`
        self._now = start if start is not None else DEFAULT_START
        self._rv = 0
        self._generation = 0  # bumped whenever resources are freed: unschedulable pods are worth retrying
        self._serial = 0
        self._out: list[tuple[str, str, bytes]] = []
        self.pods: dict[str, SimPod] = {}
        self.workloads: list[SimWorkload] = []
        # The controller object of each workload that has one (Job, ReplicaSet, PaddleJob), by its uid.
        self.controllers: dict[str, tuple[str, dict[str, Any]]] = {}
        # A gang-scheduled Job's Workload and PodGroup (1.36 WorkloadWithJob), by the Job's uid.
        self.gang_workloads: dict[str, dict[str, Any]] = {}
        self.pod_groups: dict[str, dict[str, Any]] = {}
        # A JobSet's child Jobs (the JobSet controller's), by the JobSet's uid.
        self.child_jobs: dict[str, list[dict[str, Any]]] = {}
        self.volcano = VolcanoScheduler(self._now - 90 * 86400)
        self.kueue = KueueStandIn()
        self.pods_changed: set[str] = set()  # workloads whose pods changed this tick (their status follows)
        self.dra = DraDriver(cfg.seed, self._now - 90 * 86400)
        self.log = EventLog(self)
        self.node_table = binding.NodeTable()  # the scheduler's view of the nodes, kept across ticks
        self.fold_event = self.log.fold  # for the Volcano stand-in, whose recorder folds as client-go's does
        self.nodes = self._make_nodes()
        self.namespaces = {team_namespace(t): obj.namespace(team_namespace(t), team=t) for t in cfg.teams}
        self.priority_classes = [
            obj.priority_class(
                c.name, c.value, preemption_policy=c.preemption_policy, description=c.description
            )
            for c in PRIORITY_CLASSES
        ]
        self.quotas: dict[str, dict[str, Any]] = {}
        if cfg.team_gpu_quota > 0:
            for ns in self.namespaces:
                self.quotas[ns] = obj.resource_quota(
                    ns, QUOTA_NAME, hard_gpus=cfg.team_gpu_quota, used_gpus=0
                )
        warm_ = cfg.warm_start if warm_start is None else warm_start
        if warm_:
            # The story's Volcano queue (an admin's): room for its PaddleJob, half of it guaranteed.
            gpus = story.VOLCANO_WORKERS * max(1, cfg.gpus_per_node // 2)
            # A busy cluster never has a gang's GPUs idle: the demo's vc-scheduler lets groups in on the queue's
            # capability alone (overcommit-factor 10), so its pods wait in Volcano's allocate words.
            self.volcano.overcommit_factor = 10.0
            self.volcano.add_queue(
                story.VOLCANO_QUEUE,
                weight=2,
                capability_gpus=gpus,
                deserved_gpus=gpus,
                guarantee_gpus=gpus // 2,
            )
            # Production serving and on-call debugging are not capped by the research teams' quotas.
            prod = team_namespace(story.PRODUCTION_TEAM)
            self.namespaces.setdefault(prod, obj.namespace(prod, team=story.PRODUCTION_TEAM))
            # Kueue's ClusterQueue for the story's queued Jobs: room for one of them (2 pods x a quarter node).
            self.kueue.setup(2 * max(1, cfg.gpus_per_node // 4), [prod])
        for o in [
            *self.namespaces.values(),
            *self.priority_classes,
            *self.nodes.values(),
            *self.quotas.values(),
            *(o for k in DRA_KINDS for o in self.dra.objects(k)),
        ]:
            o["metadata"]["resourceVersion"] = self._bump()
        self.generator = WorkloadGenerator(self.rng, list(cfg.teams), cfg.gpus_per_node)
        self._next_arrival = self._now + self.generator.gap(cfg.arrivals_per_hour)
        self._scripted: list[tuple[float, Callable[[], WorkloadSpec]]] = []
        self.stats: dict[str, int] = {"preemptions": 0, "quota_refusals": 0, "bound": 0, "completed": 0}
        if warm_:
            start = self._now
            self._now = start - warm.WARMUP
            warm.warm_start(self)  # the ordinary simulation, up to `start`
            self._next_arrival = start + self.generator.gap(cfg.arrivals_per_hour)
        self._out.clear()  # what happened before anyone listens is in the first LIST

    # ---- clock, identities and the store's writes -------------------------------------------------

    def now(self) -> float:
        """Return the simulated time, epoch seconds."""
        return self._now

    def _bump(self) -> str:
        self._rv += 1
        return str(self._rv)

    def next_serial(self) -> int:
        """Return the next of the serials that make uids and event names unique within a run."""
        self._serial += 1
        return self._serial

    def new_uid(self, what: str) -> str:
        """Return a new uid, the same for the same seed and order of creation."""
        return obj.new_uid(f"sim/{self.config.seed}/{what}/{self.next_serial()}")

    def suffix(self) -> str:
        """Return a controller's random five-character name suffix."""
        return "".join(self.rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))

    def emit_object(self, kind: str, body: dict[str, Any], type_: str) -> None:
        """Write an object: a new resourceVersion, and the change for watchers."""
        body["metadata"]["resourceVersion"] = self._bump()
        self._out.append((kind, type_, orjson.dumps(body)))

    def emit_pod(self, p: SimPod, type_: str) -> None:
        """Write a pod (its workload's status follows this tick)."""
        self.pods_changed.add(p.workload.uid)
        self._rv += 1
        p.resource_version = self._rv
        self._out.append(("Pod", type_, self._render(p)))

    def _render(self, p: SimPod) -> bytes:
        return pod_json.render(p, self.node_ip(p.node) if p.node else "")

    def freed(self) -> None:
        """Note that resources were freed: what could not be placed is worth trying again."""
        self._generation += 1

    @property
    def generation(self) -> int:
        """Return how often resources were freed: a pod refused at an older count is worth trying again."""
        return self._generation

    # ---- setup ------------------------------------------------------------------------------------

    def _make_nodes(self) -> dict[str, dict[str, Any]]:
        cfg = self.config
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
                created=self._now - 90 * 86400,
            )
            n["status"]["addresses"] = [
                {"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250 + 1}"},
                {"type": "Hostname", "address": name},
            ]
            out[name] = n
        for j in range(cfg.dra_nodes):
            # NVIDIA's DRA driver on these: no `nvidia.com/gpu`, the GPUs are its ResourceSlice's devices.
            i = cfg.nodes + j
            name = f"dra-node-{j:02d}"
            n = obj.node(
                name,
                gpus=0,
                cpu=str(16 * cfg.gpus_per_node),
                memory=f"{96 * cfg.gpus_per_node}Gi",
                created=self._now - 90 * 86400,
            )
            for part in ("allocatable", "capacity"):
                del n["status"][part]["nvidia.com/gpu"]
            n["status"]["addresses"] = [
                {"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250 + 1}"},
                {"type": "Hostname", "address": name},
            ]
            out[name] = n
            self.dra.add_node(n, cfg.gpus_per_node, self._now - 90 * 86400)
        return out

    def node_ip(self, name: str) -> str:
        for a in self.nodes[name]["status"].get("addresses", ()):
            if a["type"] == "InternalIP":
                return str(a["address"])
        return ""

    # ---- submissions ------------------------------------------------------------------------------

    def submit(self, spec: WorkloadSpec, *, at: float | None = None) -> SimWorkload:
        """Create a workload now (its controller creates the pods on the next tick), or schedule it for `at`."""
        if at is not None and at > self._now:
            self.script(at, lambda: spec)
            return SimWorkload(spec, "", at)
        w = SimWorkload(spec, self.new_uid(f"wl/{spec.name}"), self._now)
        w.slots = {t.name: None for t in spec.pods}
        w.next_create = self._now
        self.workloads.append(w)
        self.dra.submitted(self, spec)
        controllers.created(self, w)
        return w

    def script(self, at: float, make: Callable[[], WorkloadSpec]) -> None:
        """Submit what `make` returns at simulated time `at`: a scripted moment decided when it comes."""
        self._scripted.append((at, make))
        self._scripted.sort(key=lambda x: x[0])

    def quota_room(self, namespace: str) -> int:
        """Return the GPUs a namespace's quota still admits (a large number when it has none)."""
        q = self.quotas.get(namespace)
        if q is None:
            return 10**9
        return int(q["status"]["hard"][GPU_KEY]) - quota_used(self, namespace)

    # ---- the ClusterSource port -------------------------------------------------------------------

    def list_objects(self, kind: str) -> list[bytes]:
        """Return the current objects of a kind as the API server would list them."""
        if kind == "Namespace":
            items: list[dict[str, Any]] = list(self.namespaces.values())
        elif kind == "PriorityClass":
            items = self.priority_classes
        elif kind == "Node":
            items = list(self.nodes.values())
        elif kind == "ResourceQuota":
            items = list(self.quotas.values())
        elif kind == "Pod":
            return [self._render(p) for p in self.pods.values()]
        elif kind == "Event":
            items = list(self.log.events.values())
        elif kind in CONTROLLER:
            items = [body for k, body in self.controllers.values() if k == kind]
            if kind == "Job":
                items += [j for jobs in self.child_jobs.values() for j in jobs]
        elif kind == "Workload":
            items = list(self.gang_workloads.values())
        elif kind == "PodGroup":
            items = list(self.pod_groups.values())
        elif kind in ("VolcanoPodGroup", "VolcanoQueue"):
            items = list(self.volcano.objects(kind))
        elif kind in DRA_KINDS:
            items = self.dra.objects(kind)
        elif kind in ("KueueWorkload", "ClusterQueue", "LocalQueue", "WorkloadPriorityClass"):
            items = self.kueue.objects(kind)
        elif kind in UNSIMULATED:
            items = []
        else:
            raise ValueError(f"the simulator has no {kind!r} objects")
        return [orjson.dumps(i) for i in items]

    def drain(self) -> list[tuple[str, str, bytes]]:
        """Return and forget the changes made since the last drain: (kind, ADDED|MODIFIED|DELETED, JSON)."""
        out, self._out = self._out, []
        return out

    async def run(self, *, on_list: ListSink, on_change: ObjectSink) -> None:
        """List every kind, then advance in real time (`speed` simulated seconds per second) until cancelled."""
        import msgspec

        self._out.clear()
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
            "simulated_now": self._now,
            "speed": self.config.speed,
            "seed": self.config.seed,
            "resource_version": self._rv,
            "pods": len(self.pods),
            **self.stats,
        }

    def feed_health(self) -> SourceHealth:
        # Nothing is ever stale in a simulation: the feed is the cluster itself.
        detail = {k: v for k, v in self.health().items() if isinstance(v, str | int | float | bool | None)}
        return SourceHealth(healthy=True, detail=detail)

    # ---- metrics ----------------------------------------------------------------------------------

    def render_metrics(self, now: float | None = None, *, which: str = "all") -> str:
        return exporter.render_metrics(self, self._now if now is None else now, which=which)

    async def serve_metrics(self, host: str = "127.0.0.1", port: int = 0) -> Any:
        """Serve DCGM- and kube-state-metrics-shaped series over HTTP; return the server (`.port`, `close()`)."""
        return await exporter.serve_metrics(
            lambda which: self.render_metrics(which=which), host=host, port=port
        )

    # ---- time -------------------------------------------------------------------------------------

    def step(self, dt: float) -> None:
        """Advance the simulated clock by `dt` seconds, in ticks of at most MAX_SUBSTEP."""
        end = self._now + max(0.0, dt)
        while self._now < end:
            t = min(end, self._now + MAX_SUBSTEP)
            self._tick(t - self._now)
        self._now = end

    def _tick(self, dt: float) -> None:
        self._now += dt
        t = self._now
        self._arrivals(t)
        lifecycle.kubelet(self, t)
        lifecycle.progress(self, t, dt)
        controllers.reconcile(self, t)
        self.dra.reconcile(self, t)
        self.kueue.session(self, t)
        binding.schedule(self, t)
        changed, self.pods_changed = self.pods_changed, set()
        controllers.sync_paddle_jobs(self, t, changed)
        self._refresh_quotas()
        self.log.expire(t)

    def _arrivals(self, t: float) -> None:
        while self._scripted and self._scripted[0][0] <= t:
            _, make = self._scripted.pop(0)
            self.submit(make())
        while self._next_arrival <= t:
            self.submit(self.generator.any())
            self._next_arrival += self.generator.gap(self.config.arrivals_per_hour)

    def _refresh_quotas(self) -> None:
        charged = quotas_used(self) if self.quotas else {}
        for ns, q in self.quotas.items():
            used = str(charged.get(ns, 0))
            if q["status"]["used"][GPU_KEY] != used:
                q["status"]["used"][GPU_KEY] = used
                self.emit_object("ResourceQuota", q, "MODIFIED")

    # ---- what the Volcano stand-in does through the cluster ---------------------------------------

    def wake(self, w: SimWorkload) -> None:
        """Make a workload's controller act on its next tick (it watches what it waits for)."""
        w.next_create = min(w.next_create, self._now)

    def bind(self, p: SimPod, node: str, t: float, *, scheduler: str = "") -> None:
        """Bind a pod that another scheduler (Volcano) placed."""
        binding.bind(self, p, node, t, scheduler=scheduler)

    def unschedulable(self, p: SimPod, message: str, t: float, *, scheduler: str) -> None:
        """Mark a pod unschedulable in another scheduler's (Volcano's) words."""
        binding.unschedulable(self, p, message, t, scheduler=scheduler)

    # ---- views for tests and the exporter ---------------------------------------------------------

    def live_pods(self) -> Iterator[SimPod]:
        return iter(self.pods.values())
