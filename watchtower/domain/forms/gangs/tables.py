"""The pod groups and queues a `ClusterState` holds, and which workloads each change affects.

Kept apart from state.py, which is about pods: each upsert here returns the workloads to re-derive,
and the state touches them. Applying the same object twice returns nothing (replays are harmless).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from msgspec.structs import replace

from watchtower.domain.forms.gangs.records import (
    REF_PODGROUP,
    REF_VOLCANO,
    REF_WORKLOAD,
    Gang,
    GangWorkload,
    GroupRef,
    VolcanoQueue,
)
from watchtower.domain.workloads import WorkloadKey

GroupId = tuple[str, str, str]  # (GroupRef.source, namespace, name)


def group_key(source: str, namespace: str, name: str) -> WorkloadKey:
    """Return the workload of bare pods that name this group (what `workload_of` gives them)."""
    return WorkloadKey(namespace, "Workload" if source == REF_WORKLOAD else "PodGroup", name)


@dataclass(slots=True)
class GangTables:
    pod_groups: dict[tuple[str, str], Gang] = field(default_factory=dict)  # upstream, by (ns, name)
    volcano_groups: dict[tuple[str, str], Gang] = field(default_factory=dict)
    workloads: dict[tuple[str, str], GangWorkload] = field(default_factory=dict)  # upstream Workloads
    queues: dict[str, VolcanoQueue] = field(default_factory=dict)  # Volcano, cluster-scoped
    # A group → the workload whose pods name it (a Job's pods name a PodGroup: the Job stays the key).
    members: dict[GroupId, WorkloadKey] = field(default_factory=dict)

    def saw_pod(self, ref: GroupRef, namespace: str, workload: WorkloadKey) -> None:
        self.members[(ref.source, namespace, ref.name)] = workload

    def naming(self, source: str, namespace: str, name: str) -> list[WorkloadKey]:
        """Return the workloads whose pods name this group: its own key, and a controller's if one holds it."""
        own = group_key(source, namespace, name)
        held = self.members.get((source, namespace, name))
        return [own] if held is None or held == own else [own, held]

    def upsert_pod_group(self, g: Gang) -> list[WorkloadKey]:
        """Hold an upstream PodGroup; once scheduled it stays so (PodGroupInitiallyScheduled never reverts)."""
        key = (g.namespace, g.name)
        old = self.pod_groups.get(key)
        if old is not None and old.scheduled and not g.scheduled and old.uid == g.uid:
            g = replace(g, scheduled=True)
        if old == g:
            return []
        self.pod_groups[key] = g
        return self.naming(REF_PODGROUP, g.namespace, g.name)

    def delete_pod_group(self, g: Gang) -> list[WorkloadKey]:
        if self.pod_groups.pop((g.namespace, g.name), None) is None:
            return []
        return self.naming(REF_PODGROUP, g.namespace, g.name)

    def upsert_volcano_group(self, g: Gang) -> list[WorkloadKey]:
        """Hold a Volcano PodGroup; paddle-operator names it after its PaddleJob (paddlejob_helper.go)."""
        key = (g.namespace, g.name)
        if self.volcano_groups.get(key) == g:
            return []
        self.volcano_groups[key] = g
        return [
            *self.naming(REF_VOLCANO, g.namespace, g.name),
            WorkloadKey(g.namespace, "PaddleJob", g.name),
        ]

    def delete_volcano_group(self, g: Gang) -> list[WorkloadKey]:
        if self.volcano_groups.pop((g.namespace, g.name), None) is None:
            return []
        return [
            *self.naming(REF_VOLCANO, g.namespace, g.name),
            WorkloadKey(g.namespace, "PaddleJob", g.name),
        ]

    def upsert_workload(self, w: GangWorkload) -> list[WorkloadKey]:
        key = (w.namespace, w.name)
        if self.workloads.get(key) == w:
            return []
        self.workloads[key] = w
        return self.naming(REF_WORKLOAD, w.namespace, w.name)

    def delete_workload(self, w: GangWorkload) -> list[WorkloadKey]:
        if self.workloads.pop((w.namespace, w.name), None) is None:
            return []
        return self.naming(REF_WORKLOAD, w.namespace, w.name)

    def upsert_queue(self, q: VolcanoQueue) -> None:
        # Read when the queue JSON is presented, not into any workload's facts: nothing to re-derive.
        self.queues[q.name] = q

    def delete_queue(self, name: str) -> None:
        self.queues.pop(name, None)

    def volcano_group(self, key: WorkloadKey) -> Gang | None:
        """Return the Volcano PodGroup of a PaddleJob: paddle-operator names it after the job."""
        return self.volcano_groups.get((key.namespace, key.name))

    def gang_of(self, ref: GroupRef, namespace: str) -> tuple[Gang | None, int]:
        """Return the group a pod names and its gang minimum (0: none known)."""
        if ref.source == REF_PODGROUP:
            g = self.pod_groups.get((namespace, ref.name))
            return g, (g.min_count if g is not None else 0)
        if ref.source == REF_VOLCANO:
            g = self.volcano_groups.get((namespace, ref.name))
            return g, (g.min_count if g is not None else 0)
        w = self.workloads.get((namespace, ref.name))
        return None, (w.min_count(ref.group) if w is not None else 0)
