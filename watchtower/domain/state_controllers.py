"""The controllers part of the cluster state: pod templates, PaddleJobs that want pods, ResourceQuotas, the
refusals their controllers report and paddle-operator's warnings.

A part `ClusterState` (state.py) holds as `state.control`: this part knows which workload a controller's
pods belong to and what waits with no pod at all; re-keying the pods themselves is the state's (the
`rekey` it is given). Every change notes the workloads it touches in the state's change log (`log`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from operator import attrgetter
from typing import Any

from watchtower.domain.forms.quota.refusals import QuotaRefusal
from watchtower.domain.records import Controller, ResourceQuota

from . import kinds
from .binding import Binding
from .change_log import ChangeLog
from .operator_events import OperatorWarning
from .workloads import WorkloadKey, workload_of_controller

# PaddleJob phases before its pods all run (paddle-operator api/v1/paddlejob_types.go PaddleJobPhase);
# "" is a job the operator has not written a status for yet.
PADDLE_WAITING_PHASES = frozenset({"", "Pending", "Starting"})


@dataclass(slots=True)
class ControllerPart:
    log: ChangeLog  # the state's, shared with its other parts
    # Moves what the state indexes under a controller's own key to its workload's (the pods, Kueue's).
    rekey: Callable[[WorkloadKey, WorkloadKey], None]
    quotas: dict[tuple[str, str], ResourceQuota] = field(default_factory=dict)
    quota_refusals: dict[WorkloadKey, QuotaRefusal] = field(default_factory=dict)  # by workload
    # Pod controllers per kind, by their own key (a ReplicaSet's, not its Deployment's): what refused work
    # would be. Per kind, so that a re-list of one kind is diffed against that kind alone.
    controllers: dict[str, dict[WorkloadKey, Controller]] = field(default_factory=dict)
    # PaddleJobs that want pods and are neither running nor finished: they wait even with no pod.
    expecting: set[WorkloadKey] = field(default_factory=set)
    # paddle-operator's newest Warning about each PaddleJob: at most one per workload.
    operator_warnings: dict[WorkloadKey, OperatorWarning] = field(default_factory=dict)

    def put_refusal(self, q: QuotaRefusal) -> None:
        """Keep the newest refusal of a workload, with the first time it was ever refused (the wait's start)."""
        prev = self.quota_refusals.get(q.workload)
        if prev is not None and (q.last or 0.0) < (prev.last or 0.0):
            return
        first = q.first
        if prev is not None and prev.first is not None and (first is None or prev.first < first):
            first = prev.first
        self.log.touch(q.workload)
        self.quota_refusals[q.workload] = replace(q, first=first)

    def refuse(self, q: QuotaRefusal) -> None:
        """Record a quota refusal under the workload of the controller it names (a ReplicaSet's Deployment)."""
        top = self.workload_of_controller(q.workload)
        if top != q.workload:
            q = replace(q, workload=top, controller=q.workload)
        self.put_refusal(q)

    def warn(self, key: WorkloadKey, w: OperatorWarning) -> None:
        """Keep an operator's Warning about a workload when it is newer than the one held."""
        prev = self.operator_warnings.get(key)
        if prev is not None and (w.at < prev.at or w == prev):
            return
        self.operator_warnings[key] = w
        self.log.touch(key)

    def upsert_controller(self, c: Controller) -> None:
        """Record a controller's template; one that wants no pods (scaled to 0, finished) is forgotten."""
        key = WorkloadKey(c.namespace, c.kind, c.name)
        # A JobSet suspended (by Kueue, while its Workload waits) wants no pods, yet it alone says which
        # TrainJob the Workload is: kept while its owner lifts it (DESIGN §3.17).
        if c.pods <= 0 and not (c.kind == "JobSet" and workload_of_controller(c) != key):
            self.delete_controller(key)
            return
        held = self.controllers_of(c.kind)
        if held.get(key) == c:
            return
        held[key] = c
        if c.kind == "PaddleJob":
            if c.phase in PADDLE_WAITING_PHASES:
                self.expecting.add(key)
            else:
                self.expecting.discard(key)
        top = self.workload_of_controller(key)
        if top != key:
            # A refusal seen before its controller was keyed by it (a ReplicaSet, a child Job), or by a
            # JobSet not yet known to be a TrainJob's: it moves up, naming the controller it was for.
            early = self.quota_refusals.pop(key, None)
            if early is not None:
                self.log.touch(key)
                self.put_refusal(replace(early, workload=top, controller=early.controller or key))
            self.rekey(key, top)
        self.log.touch(top)

    def delete_controller(self, key: WorkloadKey) -> None:
        top = self.workload_of_controller(key)
        c = self.controllers.get(key.kind, {}).pop(key, None)
        self.expecting.discard(key)
        self.operator_warnings.pop(key, None)
        if c is not None:
            self.log.touch(top)

    def upsert_quota(self, q: ResourceQuota) -> None:
        old = self.quotas.get((q.namespace, q.name))
        self.quotas[(q.namespace, q.name)] = q
        if old != q:
            self._touch_expecting(q.namespace)
            self._touch_refused(q.namespace, q.name)

    def delete_quota(self, namespace: str, name: str) -> None:
        if self.quotas.pop((namespace, name), None) is not None:
            self._touch_expecting(namespace)
            self._touch_refused(namespace, name)

    def _touch_refused(self, namespace: str, name: str) -> None:
        # Work this quota refused may never start under its hard; raised, it may: read afresh.
        for key, r in self.quota_refusals.items():
            if r.quota == name and key.namespace == namespace:
                self.log.touch(key)

    def _touch_expecting(self, namespace: str) -> None:
        # A PaddleJob with no pod may wait on its namespace's quota: read afresh when the quota moves.
        for key in self.expecting:
            if key.namespace == namespace:
                self.log.touch(key)

    def bindings(self) -> dict[str, Binding[Any]]:
        """Return the bindings of the quota form's kinds: ResourceQuotas and the controllers whose pods
        they refuse (PaddleJob and JobSet are controllers too, read the same way)."""
        bound: dict[str, Binding[Any]] = {
            kinds.RESOURCE_QUOTA.name: Binding(
                self.upsert_quota,
                lambda q: self.delete_quota(q.namespace, q.name),
                self.quotas,
                attrgetter("namespace", "name"),
            )
        }
        for kind in (kinds.JOB, kinds.REPLICA_SET, kinds.PADDLE_JOB, kinds.JOBSET):
            bound[kind.name] = Binding(
                self.upsert_controller,
                lambda c: self.delete_controller(_controller_key(c)),
                self.controllers_of(kind.name),
                _controller_key,
            )
        return bound

    def quotas_in(self, namespace: str) -> list[ResourceQuota]:
        """Return the namespace's ResourceQuotas (a walk: there are a few per namespace at most)."""
        return [q for (ns, _), q in self.quotas.items() if ns == namespace]

    def controllers_of(self, kind: str) -> dict[WorkloadKey, Controller]:
        """Return the held controllers of one kind (the same dict for the life of the state)."""
        return self.controllers.setdefault(kind, {})

    def controller(self, key: WorkloadKey) -> Controller | None:
        """Return the controller of this key (its own kind and name), if it is held."""
        held = self.controllers.get(key.kind)
        return held.get(key) if held is not None else None

    def workload_of_controller(self, key: WorkloadKey) -> WorkloadKey:
        """Return the workload a controller's pods belong to, up the held controllers (a ReplicaSet's
        Deployment; a child Job's JobSet and that JobSet's TrainJob), else `key`."""
        for _ in range(3):  # the longest chain is Job → JobSet → TrainJob; a cycle must not spin
            c = self.controller(key)
            if c is None:
                break
            top = workload_of_controller(c)
            if top == key:
                break
            key = top
        return key

    def prune_refusals(self, horizon: float, now: float) -> None:
        """Forget the quota refusals and operator warnings last seen before `horizon`."""
        for key in [k for k, q in self.quota_refusals.items() if (q.last or now) < horizon]:
            del self.quota_refusals[key]
        for key in [k for k, w in self.operator_warnings.items() if w.at < horizon]:
            del self.operator_warnings[key]


def _controller_key(c: Controller) -> WorkloadKey:
    return WorkloadKey(c.namespace, c.kind, c.name)
