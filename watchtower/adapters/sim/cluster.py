"""A seeded, time-accelerated GPU cluster that speaks the API server's object shapes.

`SimulatedCluster` is a `ClusterSource`: it LISTs every kind, then streams ADDED/MODIFIED/DELETED JSON as its
simulated clock advances. Controllers (PaddleJob, Job, ReplicaSet), ResourceQuota admission, the scheduler
(sim/scheduler.py) and a kubelet stand-in act on one in-memory cluster; every object change bumps a
resourceVersion. Tests drive it with `step(dt)` and never need real time.

Over 400 lines: what could stand alone already does (scheduling, the workload mix, the scripted story, the warm
start, the exporter); what remains is the one object store and the handlers that change it in step with each
other (creation with quota admission, binding, completion, deletion with grace), which read best together.
"""

from __future__ import annotations

import asyncio
import random
import string
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from watchtower.adapters.sim import exporter, story, warm
from watchtower.adapters.sim import group_objects as grp
from watchtower.adapters.sim import jobset_objects as jso
from watchtower.adapters.sim import objects as obj
from watchtower.adapters.sim import volcano_objects as vo
from watchtower.adapters.sim.pods import CONTROLLER, SimPod, SimWorkload, memory_bytes
from watchtower.adapters.sim.scheduler import (
    TERMINATING_ON_NOMINATED,
    Bind,
    Preempt,
    SchedNode,
    Scheduler,
    queue_order,
)
from watchtower.adapters.sim.volcano import VolcanoScheduler
from watchtower.adapters.sim.workloads import (
    CLASS_BY_NAME,
    PRIORITY_CLASSES,
    PodTemplate,
    WorkloadGenerator,
    WorkloadSpec,
    team_namespace,
)
from watchtower.config.model import SimulatorConfig
from watchtower.domain.health import SourceHealth
from watchtower.domain.kinds import WATCHED
from watchtower.ports import ListSink, ObjectSink

KINDS = tuple(k.name for k in WATCHED)
# Served (installed CRDs with no objects yet), but the simulator makes none of these kinds.
UNSIMULATED: frozenset[str] = frozenset()
DEFAULT_START = 1_767_225_600.0  # 2026-01-01T00:00:00Z: a fixed epoch keeps runs comparable
QUOTA_NAME = "gpu-quota"
GPU_KEY = "requests.nvidia.com/gpu"
MAX_SUBSTEP = 10.0  # simulated seconds per internal tick: coarse steps are cut into these
EVENT_TTL = 3600.0  # kube-apiserver --event-ttl default
FINISHED_POD_TTL = 900.0  # finished pods are cleaned up after a while (Job TTL, operator cleanup)
RETRY_EVENT_EVERY = 60.0  # repeated FailedScheduling attempts are folded into the event's series
# An unschedulable pod is retried when the cluster frees something, or after this long (the scheduler's
# queueing hints and its periodic flush of the unschedulable queue).
RETRY_UNSCHEDULABLE = 60.0
MAX_BACKOFF = 300.0
GIVE_UP_AFTER = 2 * 3600.0  # people delete a job their quota has refused for this long


@dataclass
class _SchedEvent:
    body: dict[str, Any]
    message: str
    bumped: float
    count: int = 1


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
        self._pods_changed: set[str] = set()  # workloads whose pods changed this tick (their status follows)
        self.events: dict[str, dict[str, Any]] = {}
        self._event_seen: dict[str, float] = {}
        self._sched_events: dict[str, _SchedEvent] = {}
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
        for o in [
            *self.namespaces.values(),
            *self.priority_classes,
            *self.nodes.values(),
            *self.quotas.values(),
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

    # ---- clock and identities ---------------------------------------------------------------------

    def now(self) -> float:
        """Return the simulated time, epoch seconds."""
        return self._now

    def _bump(self) -> str:
        self._rv += 1
        return str(self._rv)

    def _uid(self, what: str) -> str:
        self._serial += 1
        return obj.new_uid(f"sim/{self.config.seed}/{what}/{self._serial}")

    def _suffix(self) -> str:
        return "".join(self.rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))

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
        return out

    def sched_nodes(self) -> list[SchedNode]:
        out = []
        for name, n in self.nodes.items():
            a = n["status"]["allocatable"]
            out.append(
                SchedNode(
                    name,
                    int(a["nvidia.com/gpu"]),
                    int(a["cpu"]) * 1000,
                    memory_bytes(a["memory"]),
                    int(a["pods"]),
                    bool(n["spec"].get("unschedulable")),
                )
            )
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
        w = SimWorkload(spec, self._uid(f"wl/{spec.name}"), self._now)
        w.slots = {t.name: None for t in spec.pods}
        w.next_create = self._now
        self.workloads.append(w)
        if spec.kind in CONTROLLER:
            body = self._controller_object(w)
            body["metadata"]["resourceVersion"] = self._bump()
            self.controllers[w.uid] = (spec.kind, body)
            self._out.append((spec.kind, "ADDED", orjson.dumps(body)))
        if spec.pod_group:
            self._gang_objects(w)
        if spec.volcano_queue:  # paddle-operator's constructPodGroup, before any pod
            self.emit_object("VolcanoPodGroup", self.volcano.pod_group(w), "ADDED")
        if spec.kind == "JobSet":
            jobs = jso.child_jobs(body)
            for j in jobs:
                j["metadata"]["uid"] = self._uid(f"job/{j['metadata']['name']}")
                self.emit_object("Job", j, "ADDED")
            self.child_jobs[w.uid] = jobs
        return w

    def _gang_objects(self, w: SimWorkload) -> None:
        """Make a gang Job's Workload and PodGroup before any of its pods, as the 1.36 Job controller does."""
        spec, n = w.spec, len(w.spec.pods)
        wl = grp.gang_workload(
            name=spec.name, namespace=spec.namespace, created=w.created, min_count=n, job_uid=w.uid
        )
        pg = grp.pod_group(
            name=f"{spec.name}-0",
            namespace=spec.namespace,
            created=w.created,
            min_count=n,
            job=spec.name,
            job_uid=w.uid,
        )
        self.gang_workloads[w.uid], self.pod_groups[w.uid] = wl, pg
        self._emit_object("Workload", wl, "ADDED")
        self._emit_object("PodGroup", pg, "ADDED")

    def _controller_object(self, w: SimWorkload) -> dict[str, Any]:
        """Return the workload's controller as the API server serves it: its pod template per role."""
        spec = w.spec
        pc = spec.priority_class

        def template(t: PodTemplate) -> dict[str, Any]:
            return obj.pod_template(
                gpus=t.gpus, cpu=t.cpu, memory=t.memory, priority_class=pc, image=t.image, grace=spec.grace
            )

        name, ns, at, uid = spec.name, spec.namespace, w.created, w.uid
        first = spec.pods[0]
        if spec.kind in ("PaddleJob", "JobSet"):
            roles: dict[str, tuple[int, dict[str, Any]]] = {}
            for t in spec.pods:
                n, _ = roles.get(t.role, (0, {}))
                roles[t.role] = (n + 1, template(t))
        if spec.kind == "PaddleJob":
            body = obj.paddle_job_object(name=name, namespace=ns, created=at, uid=uid, roles=roles)
            if spec.volcano_queue:  # paddlejob_types.go SchedulingPolicy; the CRD's Collective mode
                body["spec"]["schedulingPolicy"] = {
                    "minAvailable": len(spec.pods),
                    "queue": spec.volcano_queue,
                    "priorityClass": pc,
                }
                body["status"]["mode"] = "Collective"
            return body
        if spec.kind == "JobSet":
            # One Job per replica of each replicatedJob, of parallelism = its pods per Job.
            per_job = {t.role: int(t.name.rsplit("-", 2)[-1]) + 1 for t in spec.pods}
            replicas = {t.role: int(t.name.rsplit("-", 2)[-2]) + 1 for t in spec.pods}
            js = jso.jobset(
                name=name,
                namespace=ns,
                created=at,
                replicated_jobs={rj: (replicas[rj], per_job[rj], tpl) for rj, (_, tpl) in roles.items()},
                train_job=spec.train_job,
            )
            js["metadata"]["uid"] = uid
            return js
        n = len(spec.pods)
        if spec.kind == "Job":
            job = obj.job(
                name=name,
                namespace=ns,
                created=at,
                uid=uid,
                template=template(first),
                parallelism=n,
                completions=n,
            )
            if spec.pod_group:  # WorkloadWithJob gang-schedules Indexed Jobs with parallelism = completions
                job["spec"]["completionMode"] = "Indexed"
            return job
        # The simulator's ReplicaSets are a Deployment's: `<deployment>-<pod-template-hash>`.
        return obj.replica_set(
            name=name,
            namespace=ns,
            created=at,
            uid=uid,
            template=template(first),
            replicas=n,
            deployment=name.rsplit("-", 1)[0],
        )

    def script(self, at: float, make: Callable[[], WorkloadSpec]) -> None:
        """Submit what `make` returns at simulated time `at`: a scripted moment decided when it comes."""
        self._scripted.append((at, make))
        self._scripted.sort(key=lambda x: x[0])

    def quota_room(self, namespace: str) -> int:
        """Return the GPUs a namespace's quota still admits (a large number when it has none)."""
        q = self.quotas.get(namespace)
        if q is None:
            return 10**9
        return int(q["status"]["hard"][GPU_KEY]) - self._quota_used(namespace)

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
            items = list(self.events.values())
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
        self._kubelet(t)
        self._progress(t, dt)
        self._controllers(t)
        self._schedule(t)
        self._sync_paddle_jobs(t)
        self._refresh_quotas()
        self._expire_events(t)

    def _arrivals(self, t: float) -> None:
        while self._scripted and self._scripted[0][0] <= t:
            _, make = self._scripted.pop(0)
            self.submit(make())
        while self._next_arrival <= t:
            self.submit(self.generator.any())
            self._next_arrival += self.generator.gap(self.config.arrivals_per_hour)

    # ---- kubelet ----------------------------------------------------------------------------------

    def _kubelet(self, t: float) -> None:
        for p in list(self.pods.values()):
            if p.gone_at is not None and p.gone_at <= t:
                self._delete(p)
            elif (
                p.node
                and p.running_since is None
                and p.pulled_at is not None
                and p.pulled_at <= t
                and p.deletion is None
                and not p.terminal
            ):
                p.phase = "Running"
                p.running_since = p.pulled_at
                self._emit_pod(p, "MODIFIED")

    def _delete(self, p: SimPod) -> None:
        del self.pods[p.uid]
        self._generation += 1
        self._sched_events.pop(p.uid, None)
        w = p.workload
        for k, v in w.slots.items():
            if v is p:
                w.slots[k] = None
                if not w.done and w.spec.kind in CONTROLLER:
                    w.next_create = max(w.next_create, self._now)
        if w.spec.kind == "Pod" and not w.done and p.finished_at is None:
            w.done = True  # a bare pod that is gone is gone: nobody recreates it
        self._pods_changed.add(w.uid)
        self._rv += 1
        p.resource_version = self._rv
        self._out.append(("Pod", "DELETED", self._render(p)))

    def _progress(self, t: float, dt: float) -> None:
        for w in self.workloads:
            if w.done:
                continue
            live = list(w.slots.values())
            if live and all(
                p is not None and p.running_since is not None and not p.terminating for p in live
            ):
                w.progress += dt
                if w.progress >= w.spec.duration:
                    self._complete(w, t)
        kept = []
        for w in self.workloads:
            if w.done and not any(w.slots.values()):
                self._controller_gone(w)
            else:
                kept.append(w)
        self.workloads = kept

    def _controller_gone(self, w: SimWorkload) -> None:
        """Delete the controller of a workload that is over (a finished Job's TTL, a scaled-down Deployment)."""
        known = self.controllers.pop(w.uid, None)
        if known is not None:
            kind, body = known
            body["metadata"]["resourceVersion"] = self._bump()
            self._out.append((kind, "DELETED", orjson.dumps(body)))
        # The garbage collector takes what the Job owned.
        for kind, held in (("PodGroup", self.pod_groups), ("Workload", self.gang_workloads)):
            owned = held.pop(w.uid, None)
            if owned is not None:
                self._emit_object(kind, owned, "DELETED")
        volcano_group = self.volcano.forget(w)
        if volcano_group is not None:
            self._emit_object("VolcanoPodGroup", volcano_group, "DELETED")
        for j in self.child_jobs.pop(w.uid, ()):
            self._emit_object("Job", j, "DELETED")

    def _complete(self, w: SimWorkload, t: float) -> None:
        w.done = True
        self._generation += 1
        self.stats["completed"] += 1
        known = self.controllers.get(w.uid)
        if known is not None and known[0] == "Job":  # the Job controller counts what succeeded
            body = known[1]
            body["status"]["succeeded"] = len(w.spec.pods)
            body["metadata"]["resourceVersion"] = self._bump()
            self._out.append(("Job", "MODIFIED", orjson.dumps(body)))
        for p in w.slots.values():
            if p is None:
                continue
            if w.spec.kind == "ReplicaSet":
                self._terminate(p, t, actual=5.0)  # scaled down: deleted, no disruption condition
            else:
                p.phase = "Succeeded"
                p.finished_at = t
                p.gone_at = t + FINISHED_POD_TTL
                self._emit_pod(p, "MODIFIED")

    def _terminate(self, p: SimPod, t: float, *, actual: float) -> None:
        p.deletion = t + p.grace
        p.gone_at = t + min(actual, p.grace)
        self._emit_pod(p, "MODIFIED")

    # ---- controllers and quota admission ----------------------------------------------------------

    def _quota_used(self, ns: str) -> int:
        # Quota charges every pod not in a terminal phase, terminating ones included.
        return sum(p.gpus for p in self.pods.values() if p.namespace == ns and not p.terminal)

    def _controllers(self, t: float) -> None:
        for w in self.workloads:
            if w.done or t < w.next_create:
                continue
            if w.refused_since is not None and t - w.refused_since > GIVE_UP_AFTER:
                self._abandon(w, t)
                continue
            if w.spec.volcano_queue and not self.volcano.admits(w):
                continue  # paddle-operator requeues until its PodGroup is Inqueue or Running
            for slot, live in w.slots.items():
                if live is not None:
                    continue
                tpl = next(x for x in w.spec.pods if x.name == slot)
                if not self._create_pod(w, tpl, t):
                    break

    def _abandon(self, w: SimWorkload, t: float) -> None:
        w.done = True
        self._generation += 1
        for p in w.slots.values():
            if p is not None and not p.terminating:
                self._terminate(p, t, actual=self.rng.uniform(2.0, 10.0))

    def _create_pod(self, w: SimWorkload, tpl: PodTemplate, t: float) -> bool:
        spec = w.spec
        kind = spec.kind
        name = tpl.name if kind in ("PaddleJob", "Pod") else f"{spec.name}-{self._suffix()}"
        index = next(i for i, x in enumerate(spec.pods) if x.name == tpl.name)
        if spec.pod_group:  # an Indexed Job's pods: `<job>-<index>-<suffix>`
            name = f"{spec.name}-{index}-{self._suffix()}"
        child = self._child_job(w, tpl)
        if child is not None:  # a JobSet's Jobs are Indexed: `<job>-<completion index>-<suffix>`
            name = f"{tpl.name}-{self._suffix()}"
        ns = spec.namespace
        quota = self.quotas.get(ns)
        if quota is not None and tpl.gpus > 0:
            hard = int(quota["status"]["hard"][GPU_KEY])
            used = self._quota_used(ns)
            if used + tpl.gpus > hard:
                self._refused(w, tpl, name, used, hard, t)
                return False
        pc = CLASS_BY_NAME[spec.priority_class]
        labels: dict[str, str] = {"app": spec.name, "team": spec.team}
        owner = None
        if kind == "PaddleJob":
            labels.update({"paddle-res-name": name, "paddle-res-type": tpl.role})
        elif kind == "Job":
            labels.update(
                {"batch.kubernetes.io/job-name": spec.name, "job-name": spec.name, "controller-uid": w.uid}
            )
            if spec.pod_group:
                labels["batch.kubernetes.io/job-completion-index"] = str(index)
        elif kind == "ReplicaSet":
            labels["pod-template-hash"] = spec.name.rsplit("-", 1)[-1]
        if child is not None:
            cm = child["metadata"]
            labels.update(child["spec"]["template"]["metadata"]["labels"])
            labels["batch.kubernetes.io/job-completion-index"] = tpl.name.rsplit("-", 1)[-1]
            owner = obj.owner_ref("Job", cm["name"], api_version="batch/v1", uid=cm["uid"])
        elif kind in CONTROLLER:
            owner = obj.owner_ref(kind, spec.name, api_version=CONTROLLER[kind][1], uid=w.uid)
        p = SimPod(
            uid=self._uid(f"pod/{ns}/{name}"),
            name=name,
            namespace=ns,
            created=t,
            template=tpl,
            workload=w,
            priority=pc.value,
            priority_class=pc.name,
            preemption_policy=pc.preemption_policy,
            labels=labels,
            owner=owner,
            grace=spec.grace,
            group=f"{spec.name}-0" if spec.pod_group else "",
            scheduler=vo.SCHEDULER if spec.volcano_queue else "",
            annotations=vo.pod_annotations(spec.name, tpl.role, spec.volcano_queue)
            if spec.volcano_queue
            else None,
        )
        self.pods[p.uid] = p
        w.slots[tpl.name] = p
        w.backoff = 10.0
        w.refused_since = None
        self._emit_pod(p, "ADDED")
        return True

    def _refused(self, w: SimWorkload, tpl: PodTemplate, name: str, used: int, hard: int, t: float) -> None:
        self.stats["quota_refusals"] += 1
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
        if ev is not None and ev["message"] == msg and ev["metadata"]["name"] in self.events:
            ev["count"] += 1
            ev["lastTimestamp"] = obj.ts(t)
            self._emit_event(ev, "MODIFIED")
            return
        involved, component = w.ref, CONTROLLER[w.spec.kind][0]
        child = self._child_job(w, tpl)
        if child is not None:  # the child Job's controller is refused, on the child Job
            cm = child["metadata"]
            involved = {"kind": "Job", "namespace": cm["namespace"], "name": cm["name"], "uid": cm["uid"]}
            involved["apiVersion"], component = "batch/v1", "job-controller"
            msg = msg.replace(f'"{w.spec.name}-"', f'"{cm["name"]}-"')
        ev = obj.core_event(
            namespace=w.spec.namespace,
            reason=reason,
            message=msg,
            involved=involved,
            at=t,
            type_="Warning",
            component=component,
            name=f"{involved['name']}.{self._event_suffix(t)}",
        )
        ev["metadata"]["uid"] = self._uid("event")
        w.failed_create = ev
        self._emit_event(ev, "ADDED")

    def _child_job(self, w: SimWorkload, tpl: PodTemplate) -> dict[str, Any] | None:
        """Return the JobSet child Job a pod template belongs to; None for any other workload."""
        jobs = self.child_jobs.get(w.uid)
        if not jobs:
            return None
        job = tpl.name.rsplit("-", 1)[0]
        return next((j for j in jobs if j["metadata"]["name"] == job), None)

    def _event_suffix(self, t: float) -> str:
        self._serial += 1
        return f"{int(t * 1e9) + self._serial:x}"

    # ---- scheduling -------------------------------------------------------------------------------

    def _schedule(self, t: float) -> None:
        sched = Scheduler(self.sched_nodes(), self.rng)
        sched.load(p for p in self.pods.values() if not p.terminal)
        pending = [
            p
            for p in self.pods.values()
            if not p.node and not p.terminating and not p.terminal and not p.scheduler
        ]
        gen = self._generation
        gangs_seen: set[str] = set()
        for p in queue_order(pending):
            if p.group:
                # A gang is taken as one, at its first member in queue order.
                if p.workload.uid not in gangs_seen:
                    gangs_seen.add(p.workload.uid)
                    self._schedule_gang(sched, p.workload, t)
                continue
            if p.tried_at is not None and p.tried_generation == gen and t - p.tried_at < RETRY_UNSCHEDULABLE:
                continue
            d = sched.schedule(p)
            p.tried_at, p.tried_generation = t, gen
            if isinstance(d, Bind):
                self._bind(p, d.node, t)
            elif isinstance(d, Preempt):
                self._preempt(p, d, t)
            else:
                self._unschedulable(p, d.message, t)
        self.volcano.session(self, sched, t)

    def _schedule_gang(self, sched: Scheduler, w: SimWorkload, t: float) -> None:
        """Place a 1.36 gang all together or not at all (KEP-4671, the GangScheduling plugin).

        Until minCount of its pods exist they are held in PreEnqueue: no attempt, no condition, no event."""
        members = [q for q in w.slots.values() if q is not None and not q.terminal]
        if len(members) < len(w.spec.pods):
            return
        waiting = queue_order(q for q in members if not q.node and not q.terminating)
        gen = self._generation
        if not waiting or all(
            q.tried_at is not None and q.tried_generation == gen and t - q.tried_at < RETRY_UNSCHEDULABLE
            for q in waiting
        ):
            return
        saved = sched.save()
        decisions = [(q, sched.schedule(q)) for q in waiting]
        for q in waiting:
            q.tried_at, q.tried_generation = t, gen
        failed = next((d for _, d in decisions if not isinstance(d, Bind)), None)
        if failed is None:
            for q, d in decisions:
                assert isinstance(d, Bind)
                self._bind(q, d.node, t)
            self._pod_group_condition(w, t, scheduled=True)
            return
        sched.restore(saved)  # nothing of a gang that does not fit is placed (nor preempts, here)
        for q in waiting:
            self._unschedulable(q, failed.message, t)
        self._pod_group_condition(w, t, scheduled=False, message=failed.message)

    def _pod_group_condition(self, w: SimWorkload, t: float, *, scheduled: bool, message: str = "") -> None:
        body = self.pod_groups.get(w.uid)
        if body is None:
            return
        old = (body["status"].get("conditions") or [None])[0]
        if old is not None and (old["status"] == "True" or (not scheduled and old.get("message") == message)):
            return  # once scheduled it never goes back; the same words are no change
        new = grp.pod_group_condition(t, scheduled=scheduled, message=message)
        if old is not None and old["status"] == new["status"]:
            new["lastTransitionTime"] = old["lastTransitionTime"]
        body["status"]["conditions"] = [new]
        self._emit_object("PodGroup", body, "MODIFIED")

    def bind(self, p: SimPod, node: str, t: float, *, scheduler: str = "") -> None:
        """Bind a pod that another scheduler (Volcano) placed."""
        self._bind(p, node, t, scheduler=scheduler)

    def _bind(self, p: SimPod, node: str, t: float, *, scheduler: str = "") -> None:
        p.node = node
        p.nominated = ""
        p.sched_cond = obj.scheduled(t)
        p.start_time = t + 1.0
        p.pulled_at = t + self.rng.uniform(20.0, 180.0)  # image pull: GPU images are large
        taken = {i for q in self.pods.values() if q.node == node and not q.terminal for i in q.gpu_ids}
        free = [i for i in range(self.config.gpus_per_node) if i not in taken]
        p.gpu_ids = tuple(free[: p.gpus])
        self.stats["bound"] += 1
        self._sched_events.pop(p.uid, None)
        self._emit_pod(p, "MODIFIED")
        note = f"Successfully assigned {p.namespace}/{p.name} to {node}"
        if scheduler:
            ev = obj.core_event(
                namespace=p.namespace,
                reason="Scheduled",
                message=note,
                involved=self._ref(p),
                at=t,
                component=scheduler,
            )
        else:
            ev = obj.scheduler_event(
                namespace=p.namespace, reason="Scheduled", note=note, regarding=self._ref(p), at=t
            )
        self._new_scheduler_event(ev, p, t)

    def _preempt(self, p: SimPod, d: Preempt, t: float) -> None:
        for v in d.victims:
            assert isinstance(v, SimPod)
            self.stats["preemptions"] += 1
            v.disruption = obj.condition(
                "DisruptionTarget",
                "True",
                t,
                reason="PreemptionByScheduler",
                message="default-scheduler: preempting to accommodate a higher priority pod",
            )
            # Training checkpoints before it exits; serving and notebooks stop quickly.
            actual = self.rng.uniform(0.3, 1.0) * v.grace if v.grace > 60 else self.rng.uniform(2.0, 10.0)
            self._terminate(v, t, actual=actual)
            ev = obj.scheduler_event(
                namespace=v.namespace,
                reason="Preempted",
                note=f"Preempted by pod {p.uid} on node {d.node}",
                regarding=self._ref(v),
                related=self._ref(p),
                at=t,
            )
            self._new_scheduler_event(ev, v, t)
        p.nominated = d.node
        self._unschedulable(p, d.message, t, force=True)

    def unschedulable(self, p: SimPod, message: str, t: float, *, scheduler: str) -> None:
        """Mark a pod unschedulable in another scheduler's (Volcano's) words."""
        self._unschedulable(p, message, t, scheduler=scheduler)

    def _unschedulable(
        self, p: SimPod, message: str, t: float, *, force: bool = False, scheduler: str = ""
    ) -> None:
        c = p.sched_cond
        # PodScheduled=False keeps its first lastTransitionTime while the message changes (DESIGN §3.3).
        if p.unschedulable_since is None:
            p.unschedulable_since = t
        changed = c is None or c.get("message") != message
        if not force and p.nominated and TERMINATING_ON_NOMINATED not in message:
            p.nominated = ""  # preemption found nothing: the scheduler clears the nomination
            changed = True
        if changed or force:
            p.sched_cond = obj.unschedulable(p.unschedulable_since, message)
            self._emit_pod(p, "MODIFIED")
        known = self._sched_events.get(p.uid)
        if known is not None and known.message == message and known.body["metadata"]["name"] in self.events:
            if t - known.bumped >= RETRY_EVENT_EVERY:
                known.count += 1
                known.bumped = t
                if scheduler:  # core/v1 from Volcano's recorder: the count, not a series
                    known.body["count"], known.body["lastTimestamp"] = known.count, obj.ts(t)
                else:
                    known.body["series"] = {"count": known.count, "lastObservedTime": obj.micro_ts(t)}
                self._emit_event(known.body, "MODIFIED")
            return
        if scheduler:
            ev = obj.core_event(
                namespace=p.namespace,
                reason="FailedScheduling",
                message=message,
                involved=self._ref(p),
                at=t,
                type_="Warning",
                component=scheduler,
            )
        else:
            ev = obj.scheduler_event(
                namespace=p.namespace,
                reason="FailedScheduling",
                note=message,
                regarding=self._ref(p),
                at=t,
                type_="Warning",
            )
        self._sched_events[p.uid] = _SchedEvent(ev, message, t)
        self._new_scheduler_event(ev, p, t)

    def _ref(self, p: SimPod) -> dict[str, str]:
        return {
            "kind": "Pod",
            "namespace": p.namespace,
            "name": p.name,
            "uid": p.uid,
            "apiVersion": "v1",
            "resourceVersion": str(p.resource_version),
        }

    def _new_scheduler_event(self, ev: dict[str, Any], p: SimPod, t: float) -> None:
        ev["metadata"]["name"] = f"{p.name}.{self._event_suffix(t)}"
        ev["metadata"]["uid"] = self._uid("event")
        self._emit_event(ev, "ADDED")

    # ---- bookkeeping ------------------------------------------------------------------------------

    def _refresh_quotas(self) -> None:
        for ns, q in self.quotas.items():
            used = str(self._quota_used(ns))
            if q["status"]["used"][GPU_KEY] != used:
                q["status"]["used"][GPU_KEY] = used
                q["metadata"]["resourceVersion"] = self._bump()
                self._out.append(("ResourceQuota", "MODIFIED", orjson.dumps(q)))

    def _emit_object(self, kind: str, body: dict[str, Any], type_: str) -> None:
        body["metadata"]["resourceVersion"] = self._bump()
        self._out.append((kind, type_, orjson.dumps(body)))

    emit_object = _emit_object  # for the Volcano stand-in

    @property
    def generation(self) -> int:
        """Bumped whenever resources are freed: what could not be placed is worth trying again."""
        return self._generation

    def wake(self, w: SimWorkload) -> None:
        """Make a workload's controller act on its next tick (it watches what it waits for)."""
        w.next_create = min(w.next_create, self._now)

    def fold_event(
        self,
        known: dict[str, dict[str, Any]],
        involved: dict[str, str],
        *,
        reason: str,
        message: str,
        type_: str,
        component: str,
        t: float,
    ) -> None:
        """Record a core/v1 event, or count it again when the same words are still current (client-go's
        aggregation by message), in `known` by message."""
        ev = known.get(message)
        if ev is not None and ev["metadata"]["name"] in self.events:
            if t - self._event_seen[ev["metadata"]["name"]] >= RETRY_EVENT_EVERY:
                ev["count"] += 1
                ev["lastTimestamp"] = obj.ts(t)
                self._emit_event(ev, "MODIFIED")
            return
        ev = obj.core_event(
            namespace=involved["namespace"],
            reason=reason,
            message=message,
            involved=involved,
            at=t,
            type_=type_,
            component=component,
            name=f"{involved['name']}.{self._event_suffix(t)}",
        )
        ev["metadata"]["uid"] = self._uid("event")
        known[message] = ev
        self._emit_event(ev, "ADDED")

    def _sync_paddle_jobs(self, t: float) -> None:
        """Write each PaddleJob's status from its pods, when it changed (the operator's syncCurrentStatus)."""
        changed, self._pods_changed = self._pods_changed, set()
        for w in self.workloads:
            known = self.controllers.get(w.uid) if w.uid in changed else None
            if known is None or known[0] != "PaddleJob":
                continue
            body = known[1]
            replicas: dict[str, int] = {}
            for tpl in w.spec.pods:
                replicas[tpl.role] = replicas.get(tpl.role, 0) + 1
            pods = [(p.template.role, p.phase) for p in w.slots.values() if p is not None]
            status = grp.paddle_status(replicas, pods, old=body["status"], now=t)
            if status != body["status"]:
                body["status"] = status
                self._emit_object("PaddleJob", body, "MODIFIED")

    def _emit_event(self, ev: dict[str, Any], type_: str) -> None:
        name = ev["metadata"]["name"]
        ev["metadata"]["resourceVersion"] = self._bump()
        self.events[name] = ev
        self._event_seen[name] = self._now
        self._out.append(("Event", type_, orjson.dumps(ev)))

    def _expire_events(self, t: float) -> None:
        for name in [n for n, seen in self._event_seen.items() if t - seen > EVENT_TTL]:
            ev = self.events.pop(name)
            del self._event_seen[name]
            ev["metadata"]["resourceVersion"] = self._bump()  # a deletion is a write: it gets its own
            self._out.append(("Event", "DELETED", orjson.dumps(ev)))

    def _emit_pod(self, p: SimPod, type_: str) -> None:
        self._pods_changed.add(p.workload.uid)
        self._rv += 1
        p.resource_version = self._rv
        self._out.append(("Pod", type_, self._render(p)))

    def _render(self, p: SimPod) -> bytes:
        conds = [c for c in (p.sched_cond, p.disruption) if c is not None]
        tpl = p.template
        body = obj.pod(
            name=p.name,
            namespace=p.namespace,
            created=p.created,
            uid=p.uid,
            gpus=tpl.gpus,
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
        if p.group:
            body["spec"]["schedulingGroup"] = {"podGroupName": p.group}
        if p.scheduler:
            body["spec"]["schedulerName"] = p.scheduler
        if p.annotations:
            body["metadata"]["annotations"] = {**body["metadata"].get("annotations", {}), **p.annotations}
        st = body["status"]
        if p.node:
            st["hostIP"] = self.node_ip(p.node)
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

    # ---- views for tests and the exporter ---------------------------------------------------------

    def live_pods(self) -> Iterator[SimPod]:
        return iter(self.pods.values())
