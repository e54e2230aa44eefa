"""Pod groups: the gangs the scheduler holds pods in, and the Volcano queues that are teams' entitlement.

Upstream gang scheduling (scheduling.k8s.io, feature gate GenericWorkload, DESIGN §3.14) keeps an
incomplete gang's pods in PreEnqueue with no condition and no event: only the group's minimum against
the pods that exist says why they wait. Volcano keeps its own PodGroup with a phase and conditions.
One small record per group, not per pod: a pod carries a shared `GroupRef` naming its group.
"""

from __future__ import annotations

import msgspec

# What the wait was read from (WorkloadFacts.source).
SOURCE_PODS = "pods"
SOURCE_QUOTA = "quota"
SOURCE_PADDLEJOB = "paddlejob"
SOURCE_PODGROUP = "podgroup"
SOURCE_VOLCANO = "volcano-podgroup"

# GroupRef.source: how a pod names its group.
REF_PODGROUP = "podgroup"  # 1.36 spec.schedulingGroup.podGroupName
REF_WORKLOAD = "workload"  # 1.35 spec.workloadRef {name, podGroup}
REF_VOLCANO = "volcano"  # annotation scheduling.k8s.io/group-name

# The pod annotation Volcano's scheduler reads the group from (volcano-sh/apis
# pkg/apis/scheduling/v1beta1/labels.go KubeGroupNameAnnotationKey).
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"

# Volcano PodGroup phases in which its pods are not all placed yet (v1beta1/types.go PodGroupPhase).
VOLCANO_WAITING_PHASES = frozenset({"Pending", "Inqueue"})


class GroupRef(msgspec.Struct, frozen=True, gc=False):
    """The group a pod names: one shared object per group, not one per pod."""

    source: str  # REF_PODGROUP, REF_WORKLOAD or REF_VOLCANO
    name: str  # the PodGroup's name; for REF_WORKLOAD the Workload's
    group: str = ""  # REF_WORKLOAD: the podGroup within the Workload


class Gang(msgspec.Struct, frozen=True, gc=False):
    """A PodGroup as its scheduler keeps it: upstream (scheduling.k8s.io) or Volcano's."""

    namespace: str
    name: str
    uid: str = ""
    created: float | None = None
    min_count: int = 0  # upstream gang minCount / Volcano minMember; 0: no gang policy
    # Upstream PodGroupScheduled / PodGroupInitiallyScheduled True: once true it never goes back.
    scheduled: bool = False
    reason: str = ""  # of the scheduled condition (False) or Volcano's Unschedulable condition
    message: str = ""  # the scheduler's words
    phase: str = ""  # Volcano: Pending, Inqueue, Running, Unknown, Completed
    queue: str = ""  # Volcano spec.queue
    priority_class: str = ""  # spec.priorityClassName (Volcano's and, from 1.36, upstream's)
    running: int = 0  # Volcano status.running
    priority: int | None = None  # upstream spec.priority, filled in by admission from the class


class GangWorkload(msgspec.Struct, frozen=True, gc=False):
    """An upstream Workload: the gang minimum of each of its pod groups (1.35) or templates (1.36)."""

    namespace: str
    name: str
    uid: str = ""
    min_counts: tuple[tuple[str, int], ...] = ()  # (group or template name, minCount; 0 = basic policy)

    def min_count(self, group: str) -> int:
        """Return the gang minimum of one of its groups; 0 when it has none (basic) or no such group."""
        for name, n in self.min_counts:
            if name == group:
                return n
        return 0


class VolcanoQueue(msgspec.Struct, frozen=True, gc=False):
    """A Volcano Queue (cluster-scoped): what its teams are entitled to, in GPUs."""

    name: str
    weight: int = 0
    capability_gpus: int | None = None  # spec.capability: the most it may ever use
    deserved_gpus: int | None = None  # spec.deserved: its fair share, lent out while unused
    guarantee_gpus: int | None = None  # spec.guarantee.resource: reserved for it
    allocated_gpus: int | None = None  # status.allocated
    state: str = ""  # status.state: Open, Closed, ...
