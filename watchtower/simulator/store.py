"""The simulated API server's store: every kind's objects, the resourceVersion each write bumps, the changes a
watcher drains; and what every actor draws from beside it: the simulated clock, the seeded randomness, uids.

The actors (controllers.py, lifecycle.py, binding.py, events.py and the forms' controllers, forms/<name>/)
receive this store and write through it; cluster.py composes them and decides when each acts.
"""

from __future__ import annotations

import random
import string
from collections.abc import Iterator
from typing import Any

import orjson

from watchtower.config.model import SimulatorConfig
from watchtower.simulator import objects as obj
from watchtower.simulator import pod_json
from watchtower.simulator.pods import SimPod, SimWorkload


class Store:
    """The objects of a simulated cluster and their changes, on a simulated clock."""

    def __init__(self, config: SimulatorConfig, now: float) -> None:
        self.config = config
        self.rng = random.Random(config.seed)
        self._now = now
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
        self.nodes: dict[str, dict[str, Any]] = {}
        # The GPUs a node offers as devices (DRA's ResourceSlices) instead of `nvidia.com/gpu`, by node.
        self.device_gpus: dict[str, int] = {}
        self.namespaces: dict[str, dict[str, Any]] = {}
        self.priority_classes: list[dict[str, Any]] = []
        self.quotas: dict[str, dict[str, Any]] = {}
        self.pods_changed: set[str] = set()  # workloads whose pods changed this tick (their status follows)
        self.stats: dict[str, int] = {"preemptions": 0, "quota_refusals": 0, "bound": 0, "completed": 0}

    # ---- the clock --------------------------------------------------------------------------------

    def now(self) -> float:
        """Return the simulated time, epoch seconds."""
        return self._now

    def set_now(self, t: float) -> None:
        """Move the simulated clock to `t` (the cluster's step; a prelude's start before the start)."""
        self._now = t

    # ---- identities -------------------------------------------------------------------------------

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

    # ---- writes -----------------------------------------------------------------------------------

    def stamp(self, body: dict[str, Any]) -> None:
        """Give an object the next resourceVersion without a change (what exists before anyone listens)."""
        self._rv += 1
        body["metadata"]["resourceVersion"] = str(self._rv)

    def emit(self, kind: str, body: dict[str, Any], type_: str) -> None:
        """Write an object: a new resourceVersion, and the change (ADDED, MODIFIED or DELETED) for watchers."""
        self.stamp(body)
        self._out.append((kind, type_, orjson.dumps(body)))

    def emit_pod(self, p: SimPod, type_: str) -> None:
        """Write a pod (its workload's status follows this tick)."""
        self.pods_changed.add(p.workload.uid)
        self._rv += 1
        p.resource_version = self._rv
        self._out.append(("Pod", type_, self.render(p)))

    def terminate(self, p: SimPod, t: float, *, actual: float) -> None:
        """Delete a pod with its grace period: it is gone after `actual` seconds, or the grace, if sooner."""
        p.deletion = t + p.grace
        p.gone_at = t + min(actual, p.grace)
        self.emit_pod(p, "MODIFIED")

    def ungate(self, p: SimPod, gate: str) -> None:
        """Remove a scheduling gate from a pod (an update of it: the API server keeps its SchedulingGated
        condition until the scheduler writes another); without gates it is scheduled on the next cycle."""
        if gate in p.gates:
            p.gates = tuple(g for g in p.gates if g != gate)
            self.emit_pod(p, "MODIFIED")

    def drain(self) -> list[tuple[str, str, bytes]]:
        """Return and forget the changes made since the last drain: (kind, ADDED|MODIFIED|DELETED, JSON)."""
        out, self._out = self._out, []
        return out

    @property
    def resource_version(self) -> int:
        """Return the last resourceVersion written."""
        return self._rv

    # ---- what the actors read ---------------------------------------------------------------------

    def render(self, p: SimPod) -> bytes:
        """Return a pod as the API server serves it."""
        return pod_json.render(p, self.node_ip(p.node) if p.node else "")

    def node_ip(self, name: str) -> str:
        for a in self.nodes[name]["status"].get("addresses", ()):
            if a["type"] == "InternalIP":
                return str(a["address"])
        return ""

    def live_pods(self) -> Iterator[SimPod]:
        return iter(self.pods.values())

    def freed(self) -> None:
        """Note that resources were freed: what could not be placed is worth trying again."""
        self._generation += 1

    @property
    def generation(self) -> int:
        """Return how often resources were freed: a pod refused at an older count is worth trying again."""
        return self._generation

    def wake(self, w: SimWorkload) -> None:
        """Make a workload's controller act on its next tick (it watches what it waits for)."""
        w.next_create = min(w.next_create, self._now)
