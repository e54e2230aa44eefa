"""The Kueue form's part of the state: Kueue Workloads (keyed by their job), ClusterQueues, LocalQueues,
WorkloadPriorityClasses, and the positions Kueue's visibility API gives the pending Workloads.

Applies their objects to the Kueue tables (tables.py) and touches the jobs whose facts they
change; a Workload that shows a preemption records it in the state's preemption ledger, with the GPUs
its DRA claims ask counted in.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Protocol

from msgspec.structs import replace as with_fields

from watchtower.domain import kinds
from watchtower.domain.binding import Binding
from watchtower.domain.change_log import ChangeLog
from watchtower.domain.disruptions import started_at
from watchtower.domain.forms.dra.tables import DraTables
from watchtower.domain.forms.kueue.dra import all_claims, claim_user, pod_set_gpus
from watchtower.domain.forms.kueue.preemption import attributed, kueue_preemption, record_key
from watchtower.domain.forms.kueue.records import (
    ClusterQueue,
    KueueWorkload,
    LocalQueue,
    WorkloadPriorityClass,
)
from watchtower.domain.forms.kueue.tables import KueueTables, NsName
from watchtower.domain.preemption_ledger import PreemptionLedger, PreemptionSeen
from watchtower.domain.records import Pod
from watchtower.domain.state_controllers import ControllerPart
from watchtower.domain.workloads import WorkloadKey

_ns_name = attrgetter("namespace", "name")


class KueueHost(Protocol):
    @property
    def kueue(self) -> KueueTables: ...
    @property
    def dra(self) -> DraTables: ...
    @property
    def pods(self) -> Mapping[str, Pod]: ...
    @property
    def by_workload(self) -> Mapping[WorkloadKey, set[str]]: ...
    @property
    def ledger(self) -> PreemptionLedger: ...
    @property
    def log(self) -> ChangeLog: ...
    @property
    def control(self) -> ControllerPart: ...
    def kueue_priority(self, w: KueueWorkload) -> tuple[int, str]: ...


@dataclass(slots=True)
class KueueForm:
    host: KueueHost

    def _touch_each(self, keys: list[WorkloadKey]) -> None:
        for key in keys:
            self.host.log.touch(key)

    def upsert_workload(self, w: KueueWorkload) -> list[PreemptionSeen]:
        """Hold a Kueue Workload; return its preemption when it newly shows one (and attribute any that
        waited for it as their preemptor)."""
        h = self.host
        prev = h.kueue.workloads.get((w.namespace, w.name))
        if w.dra is not None or (prev is not None and prev.dra is not None):
            w = self._with_claims(prev, w)
        old, touched = h.kueue.upsert_workload(w, h.control.workload_of_controller)
        self._touch_each(touched)
        if not touched:
            return []
        out: list[PreemptionSeen] = []
        key = h.kueue.keys[(w.namespace, w.name)]
        rk = record_key(w)
        ledger = h.ledger
        if w.preempted is not None and rk not in ledger.preemptions:
            prio, pclass = h.kueue_priority(w)
            pods = [h.pods[u] for u in h.by_workload.get(key, ()) if u in h.pods]
            starts = [s for s in map(started_at, pods) if s is not None]
            p = kueue_preemption(
                w, old, key, prio, pclass, pods_known=bool(pods), pods_started=min(starts, default=None)
            )
            if p is not None:
                found = h.kueue.by_workload_uid(p.preemptor_uid) if p.preemptor_uid else None
                if found is not None:
                    p = attributed(p, found[0], *h.kueue_priority(found[0]))
                elif p.preemptor_uid:
                    ledger.awaited_preemptors.setdefault(p.preemptor_uid, set()).add(rk)
                ledger.preemptions[rk] = p
                out.append(PreemptionSeen(p, new=True))
        for rk in sorted(ledger.awaited_preemptors.pop(w.uid, ())) if w.uid else ():
            rec = ledger.preemptions.get(rk)
            if rec is not None and rec.preemptor_priority is None:
                rec = attributed(rec, w, *h.kueue_priority(w))
                ledger.preemptions[rk] = rec
                out.append(PreemptionSeen(rec, new=False))
        return out

    def _with_claims(self, prev: KueueWorkload | None, w: KueueWorkload) -> KueueWorkload:
        """Return the Workload with the GPUs its pod sets' DRA claims ask, and index it under them."""
        h = self.host
        user = claim_user(w.namespace, w.name)
        was, now = all_claims(prev) if prev is not None else (), all_claims(w)
        if was and was != now:
            h.dra.saw_pod(user, w.namespace, was, gone=True)
        if now and was != now:
            h.dra.saw_pod(user, w.namespace, now)
        if w.dra is None:
            return w
        gpus, per_pod = pod_set_gpus(h.dra, w)
        if (gpus, per_pod) == (w.dra.gpus, w.dra.per_pod):
            return w
        return with_fields(w, dra=with_fields(w.dra, gpus=gpus, per_pod=per_pod))

    def delete_workload(self, w: KueueWorkload) -> None:
        h = self.host
        held = h.kueue.workloads.get((w.namespace, w.name))
        if held is not None and held.dra is not None:
            h.dra.saw_pod(claim_user(w.namespace, w.name), w.namespace, all_claims(held), gone=True)
        self._touch_each(h.kueue.delete_workload(w))

    def upsert_cluster_queue(self, q: ClusterQueue) -> None:
        h = self.host
        # Read when the queue JSON and the stuck heads are made, not into any workload's facts.
        h.kueue.cluster_queues[q.name] = q

    def delete_cluster_queue(self, q: ClusterQueue) -> None:
        h = self.host
        h.kueue.cluster_queues.pop(q.name, None)

    def upsert_local_queue(self, q: LocalQueue) -> None:
        h = self.host
        old = h.kueue.local_queues.get((q.namespace, q.name))
        h.kueue.local_queues[(q.namespace, q.name)] = q
        if old is None or old.cluster_queue != q.cluster_queue:
            self._touch_local_queue(q)

    def delete_local_queue(self, q: LocalQueue) -> None:
        h = self.host
        if h.kueue.local_queues.pop((q.namespace, q.name), None) is not None:
            self._touch_local_queue(q)

    def _touch_local_queue(self, q: LocalQueue) -> None:
        h = self.host
        for key in h.kueue.held:
            w = h.kueue.of_key(key)
            if w is not None and w.namespace == q.namespace and w.local_queue == q.name:
                h.log.touch(key)

    def upsert_priority_class(self, pc: WorkloadPriorityClass) -> None:
        h = self.host
        if h.kueue.priority_classes.get(pc.name) != pc:
            h.kueue.priority_classes[pc.name] = pc
            h.log.touch_all()

    def delete_priority_class(self, pc: WorkloadPriorityClass) -> None:
        h = self.host
        if h.kueue.priority_classes.pop(pc.name, None) is not None:
            h.log.touch_all()

    def set_positions(self, positions: dict[NsName, int], queues: set[str]) -> None:
        """Take the positions the visibility API gives the pending Workloads of these ClusterQueues."""
        h = self.host
        self._touch_each(h.kueue.set_positions(positions, queues))

    def bindings(self) -> dict[str, Binding[Any]]:
        """Return the bindings of this form's kinds, by kind name."""
        t = self.host.kueue
        name = attrgetter("name")
        return {
            kinds.KUEUE_WORKLOAD.name: Binding(
                self.upsert_workload, self.delete_workload, t.workloads, _ns_name
            ),
            kinds.CLUSTER_QUEUE.name: Binding(
                self.upsert_cluster_queue, self.delete_cluster_queue, t.cluster_queues, name
            ),
            kinds.LOCAL_QUEUE.name: Binding(
                self.upsert_local_queue, self.delete_local_queue, t.local_queues, _ns_name
            ),
            kinds.WORKLOAD_PRIORITY_CLASS.name: Binding(
                self.upsert_priority_class, self.delete_priority_class, t.priority_classes, name
            ),
        }
