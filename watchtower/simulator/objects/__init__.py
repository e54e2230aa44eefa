"""API objects shaped exactly as kube-apiserver serves them (JSON-ready dicts).

Used by the simulator to feed the same decoder the Kubernetes adapter feeds, and by tests to build
real-shaped objects (`from watchtower.simulator import objects as o`). Field names, nesting, time formats and
condition shapes follow core/v1.

One module per what is built: `meta` (times, UIDs, owner references, conditions, the List), `pods` (Pods and
their scheduling conditions), `admin` (nodes, namespaces, priority classes, quotas), `events` (core/v1 and
kube-scheduler events) and `controllers` (Jobs, ReplicaSets, PaddleJobs, pod templates). This package
re-exports every builder so that `objects.pod(...)`, `objects.node(...)` and the rest read as one vocabulary;
the other queue forms' objects (Kueue, Volcano, JobSet, PodGroup, DRA) are in the simulator's `*_objects`
modules.
"""

from .admin import namespace, node, priority_class, resource_quota
from .controllers import PADDLE_API, controller_meta, job, paddle_job_object, pod_template, replica_set
from .events import core_event, scheduler_event
from .meta import condition, micro_ts, new_uid, object_list, owner_ref, ts
from .pods import pod, pod_ref, scheduled, scheduling_gated, unschedulable

__all__ = [
    "PADDLE_API",
    "condition",
    "controller_meta",
    "core_event",
    "job",
    "micro_ts",
    "namespace",
    "new_uid",
    "node",
    "object_list",
    "owner_ref",
    "paddle_job_object",
    "pod",
    "pod_ref",
    "pod_template",
    "priority_class",
    "replica_set",
    "resource_quota",
    "scheduled",
    "scheduler_event",
    "scheduling_gated",
    "ts",
    "unschedulable",
]
