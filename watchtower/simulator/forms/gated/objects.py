"""What the gated form's simulated controllers write, in their upstream shapes.

- Kueue's plain-pod integration (sigs.k8s.io/kueue keps/976-plain-pods, pkg/controller/jobs/pod): its webhook
  gives each pod of a group the gate `kueue.x-k8s.io/admission` and the label `kueue.x-k8s.io/managed`; the
  user labels the group `kueue.x-k8s.io/pod-group-name` and annotates it `kueue.x-k8s.io/pod-group-total-count`;
  once the group's pods exist, Kueue makes one Workload named after the group, annotated
  `kueue.x-k8s.io/is-group-workload`, owned by each pod without a controller reference, its pod set named by
  the pods' role hash; on admission it removes the gate from every pod.
- Volcano 1.15 (volcano-sh/volcano docs/design/scheduling-gates-queue-admission.md): pods that opt in with the
  annotation `scheduling.volcano.sh/queue-allocation-gate: "true"` get the gate of the same name from the
  webhook; vc-scheduler's allocate removes it once the queue has room (forms/gangs/volcano.py).
"""

from __future__ import annotations

import hashlib
from typing import Any

import orjson

from watchtower.simulator.forms.kueue import objects as ko

KUEUE_ADMISSION_GATE = "kueue.x-k8s.io/admission"
KUEUE_POD_GROUP_LABEL = "kueue.x-k8s.io/pod-group-name"
KUEUE_POD_GROUP_TOTAL = "kueue.x-k8s.io/pod-group-total-count"
KUEUE_MANAGED_LABEL = "kueue.x-k8s.io/managed"
KUEUE_GROUP_WORKLOAD = "kueue.x-k8s.io/is-group-workload"
VOLCANO_QUEUE_GATE = "scheduling.volcano.sh/queue-allocation-gate"
VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"


def role_hash(template: dict[str, Any]) -> str:
    """A pod set's name in a plain-pod group's Workload: a hash of its pods' shape (Kueue's role hash: the
    first 8 hex digits of a SHA-256 over the shape; the simulator hashes the whole template)."""
    return hashlib.sha256(orjson.dumps(template, option=orjson.OPT_SORT_KEYS)).hexdigest()[:8]


def group_workload(
    *,
    group: str,
    namespace: str,
    queue: str,
    created: float,
    pods: list[tuple[str, str]],
    template: dict[str, Any],
    priority: int,
    priority_class: str,
) -> dict[str, Any]:
    """The Workload Kueue's pod reconciler makes for a complete plain-pod group (`pods`: (name, uid) of each),
    pending until admitted."""
    first_name, first_uid = pods[0]
    first = {
        "kind": "Pod",
        "apiVersion": "v1",
        "metadata": {"name": first_name, "namespace": namespace, "uid": first_uid},
    }
    body = ko.workload(
        job=first,
        queue=queue,
        created=created,
        pod_sets=[(role_hash(template), len(pods), template)],
        priority=priority,
        priority_class=priority_class,
    )
    meta = body["metadata"]
    meta["name"] = group
    meta["annotations"] = {KUEUE_GROUP_WORKLOAD: "true"}
    meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": n, "uid": u} for n, u in pods]
    return body
