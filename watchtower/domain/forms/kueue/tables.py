"""The Kueue objects a `ClusterState` holds, and which workloads each change affects.

A Kueue Workload is keyed by its job's WorkloadKey (its controller owner), so that the Job's pods and
its Kueue Workload are one workload; a Workload with no owner is its own (`KueueWorkload`). Each upsert
returns the workloads to re-derive; applying the same object twice returns nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from watchtower.domain.forms.kueue.records import (
    KUEUE_WORKLOAD_KIND,
    ClusterQueue,
    KueueWorkload,
    LocalQueue,
    WorkloadPriorityClass,
)
from watchtower.domain.workloads import WorkloadKey, workload_kind

NsName = tuple[str, str]


def own_key(w: KueueWorkload) -> WorkloadKey:
    """Return the workload key a Kueue Workload's job gives its pods, one step up (its owner), else its own."""
    o = w.owner
    if o is not None and o.name and o.kind:
        return WorkloadKey(w.namespace, workload_kind(o.kind, o.api_version), o.name)
    return WorkloadKey(w.namespace, KUEUE_WORKLOAD_KIND, w.name)


@dataclass(slots=True)
class KueueTables:
    workloads: dict[NsName, KueueWorkload] = field(default_factory=dict)
    keys: dict[NsName, WorkloadKey] = field(default_factory=dict)  # the workload each is keyed under
    by_key: dict[WorkloadKey, NsName] = field(default_factory=dict)  # the newest Kueue Workload of a job
    by_uid: dict[str, NsName] = field(default_factory=dict)
    # Jobs whose Kueue Workload is held and not finished: they may wait with no pod at all.
    held: set[WorkloadKey] = field(default_factory=set)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[NsName, LocalQueue] = field(default_factory=dict)
    priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    # From the visibility API: (namespace, Workload name) → 0-based position in its ClusterQueue.
    positions: dict[NsName, int] = field(default_factory=dict)

    def upsert_workload(
        self, w: KueueWorkload, key_of: Callable[[WorkloadKey], WorkloadKey]
    ) -> tuple[KueueWorkload | None, list[WorkloadKey]]:
        """Hold a Kueue Workload; return the one it replaces and the workloads to re-derive.

        `key_of` lifts the owner's key to the top workload (a JobSet's TrainJob), as the state keys pods."""
        nn = (w.namespace, w.name)
        old = self.workloads.get(nn)
        if old == w:
            return old, []
        key = key_of(own_key(w))
        prev_key = self.keys.get(nn)
        self.workloads[nn] = w
        self.keys[nn] = key
        if w.uid:
            self.by_uid[w.uid] = nn
        touched = [key]
        if prev_key is not None and prev_key != key:
            self._unindex(nn, prev_key)
            touched.append(prev_key)
        current = self.by_key.get(key)
        newest = current is None or current == nn or self._newer(w, self.workloads.get(current))
        if newest:
            self.by_key[key] = nn
            if w.finished:
                self.held.discard(key)
            else:
                self.held.add(key)
        return old, touched

    @staticmethod
    def _newer(w: KueueWorkload, other: KueueWorkload | None) -> bool:
        return other is None or (w.created or 0.0) >= (other.created or 0.0)

    def _unindex(self, nn: NsName, key: WorkloadKey) -> None:
        if self.by_key.get(key) == nn:
            del self.by_key[key]
            self.held.discard(key)

    def rekey(self, old: WorkloadKey, new: WorkloadKey) -> list[WorkloadKey]:
        """Key the Workloads held under `old` (a JobSet's, seen before the JobSet named its TrainJob) under
        `new`; return the workloads to re-derive. A walk, done only when `old` holds one."""
        moved = [nn for nn, k in self.keys.items() if k == old]
        if not moved:
            return []
        was_held = old in self.held
        newest = self.by_key.pop(old, None)
        self.held.discard(old)
        for nn in moved:
            self.keys[nn] = new
        current = self.by_key.get(new)
        if newest is not None and (
            current is None or self._newer(self.workloads[newest], self.workloads.get(current))
        ):
            self.by_key[new] = newest
            if was_held:
                self.held.add(new)
            else:
                self.held.discard(new)
        return [old, new]

    def delete_workload(self, w: KueueWorkload) -> list[WorkloadKey]:
        nn = (w.namespace, w.name)
        old = self.workloads.pop(nn, None)
        key = self.keys.pop(nn, None)
        self.positions.pop(nn, None)
        if old is None or key is None:
            return []
        if old.uid and self.by_uid.get(old.uid) == nn:
            del self.by_uid[old.uid]
        self._unindex(nn, key)
        return [key]

    def of_key(self, key: WorkloadKey) -> KueueWorkload | None:
        """Return the newest Kueue Workload of a job, if one is held."""
        nn = self.by_key.get(key)
        return self.workloads.get(nn) if nn is not None else None

    def by_workload_uid(self, uid: str) -> tuple[KueueWorkload, WorkloadKey] | None:
        nn = self.by_uid.get(uid)
        if nn is None:
            return None
        w, key = self.workloads.get(nn), self.keys.get(nn)
        return (w, key) if w is not None and key is not None else None

    def cluster_queue_of(self, w: KueueWorkload) -> str:
        """Return the ClusterQueue it is admitted to, else the one its LocalQueue points at ("" unknown)."""
        if w.cluster_queue:
            return w.cluster_queue
        lq = self.local_queues.get((w.namespace, w.local_queue))
        return lq.cluster_queue if lq is not None else ""

    def priority_of(self, w: KueueWorkload) -> int | None:
        """Return its priority: spec.priority, else its WorkloadPriorityClass's value (None: not known)."""
        if w.priority is not None:
            return w.priority
        if w.priority_class_kind == "WorkloadPriorityClass":
            pc = self.priority_classes.get(w.priority_class)
            return pc.value if pc is not None else None
        return None

    def set_positions(self, positions: Mapping[NsName, int], queues: set[str]) -> list[WorkloadKey]:
        """Take the visibility API's positions for these ClusterQueues; return the workloads whose moved."""
        touched: list[WorkloadKey] = []
        for nn in [nn for nn in self.positions if self._in(nn, queues) and nn not in positions]:
            del self.positions[nn]
            key = self.keys.get(nn)
            if key is not None:
                touched.append(key)
        for nn, pos in positions.items():
            if self.positions.get(nn) != pos:
                self.positions[nn] = pos
                key = self.keys.get(nn)
                if key is not None:
                    touched.append(key)
        return touched

    def _in(self, nn: NsName, queues: set[str]) -> bool:
        w = self.workloads.get(nn)
        return w is None or self.cluster_queue_of(w) in queues

    def keys_in_queue(self, cq: str) -> list[WorkloadKey]:
        """Return the held jobs waiting on this ClusterQueue (a walk: called when a queue or class changes)."""
        out = []
        for key in self.held:
            w = self.of_key(key)
            if w is not None and w.waiting and self.cluster_queue_of(w) == cq:
                out.append(key)
        return out
