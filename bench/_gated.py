"""The tick benchmark's gated groups (issue 30): 2,500 Kueue plain-pod groups of 4 pods, 10,000 gated pods.

Each group is what Kueue's plain-pod integration leaves while it holds the group for quota
(watchtower/simulator/forms/gated/objects.py, from sigs.k8s.io/kueue pkg/controller/jobs/pod): pods labelled
`kueue.x-k8s.io/pod-group-name`, annotated with the group's size, behind `kueue.x-k8s.io/admission` and
`kueue.x-k8s.io/topology`, `PodScheduled=False` reason `SchedulingGated`; and one pending Workload named after
the group, owned by its pods without a controller reference. Built as domain records, as bench/tick.py builds its
pods; `raw_gated` gives the reference the same pods as API-shaped dicts. `traced_bytes_per_gated_object` decodes
the same number of groups from API JSON through the Ingestor and measures what the state retains.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from _kueue import CLASSES, MESSAGE
from msgspec.structs import replace

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.forms.gated.records import (
    KUEUE_ADMISSION_GATE,
    KUEUE_POD_GROUP_LABEL,
    KUEUE_POD_GROUP_TOTAL,
    KUEUE_TOPOLOGY_GATE,
)
from watchtower.domain.forms.kueue.records import KueueWorkload
from watchtower.domain.records import Condition, Pod
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator import objects as o
from watchtower.simulator.forms.gated import objects as go

NewPod = Callable[..., Pod]
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GATES = tuple(sorted((KUEUE_ADMISSION_GATE, KUEUE_TOPOLOGY_GATE)))
PER_GROUP = 4


@dataclass
class GatedKinds:
    pods: list[Pod] = field(default_factory=list)
    workloads: list[KueueWorkload] = field(default_factory=list)  # one per group, held for quota


def build_gated(rnd: random.Random, new: NewPod, now: float, *, groups: int = 2_500) -> GatedKinds:
    """Return `groups` plain-pod groups of PER_GROUP gated pods each, and each group's pending Workload."""
    g = GatedKinds()
    for i in range(groups):
        ns = f"team-{i % 200:03d}"
        group = f"pg-{i}"
        cls, value = CLASSES[i % 3]
        per_pod = rnd.choice([1, 2, 4, 8])
        labels = {QUEUE_LABEL: "research", KUEUE_POD_GROUP_LABEL: group, go.KUEUE_MANAGED_LABEL: "true"}
        first = now
        for j in range(PER_GROUP):
            p = new(
                ns,
                f"{group}-{j}",
                owner=None,
                pending=True,
                gpus=per_pod,
                prio=(100_000, "batch"),
                labels=labels,
            )
            p = replace(
                p,
                scheduling_gated=True,
                gates=GATES,
                group_total=PER_GROUP,
                scheduled=Condition("False", "SchedulingGated", "", p.created),
                nominated_node="",
            )
            first = min(first, p.created)
            g.pods.append(p)
        g.workloads.append(
            KueueWorkload(
                ns,
                group,
                f"pgwl-uid-{i}",
                first + 1,
                None,
                "research",
                "",
                value,
                cls,
                "WorkloadPriorityClass",
                "batch",
                None,
                PER_GROUP,
                PER_GROUP * per_pod,
                per_pod,
                reserved=False,
                quota_changed=first + 2,
                admitted=False,
                admitted_at=None,
                reason="Pending",
                message=MESSAGE,
            )
        )
    return g


def raw_gated(g: GatedKinds) -> list[dict[str, Any]]:
    """The reference's gated pods: API-shaped dicts with the fields the work reads."""
    return [
        {
            "metadata": {
                "namespace": p.namespace,
                "name": p.name,
                "created": p.created,
                "labels": dict(p.labels),
                "annotations": {KUEUE_POD_GROUP_TOTAL: str(p.group_total)},
            },
            "spec": {"schedulingGates": [{"name": n} for n in p.gates], "gpus": p.gpus},
        }
        for p in g.pods
    ]


def naive_gated(
    raw_pods: list[dict[str, Any]],
    raw_workloads: dict[tuple[str, str], dict[str, Any]],
    local_queues: dict[tuple[str, str], str],
    tier_name: Callable[[int, str], str],
    now: float,
) -> int:
    """The reference's gated work: pods grouped by their pod group, joined with the group's Workload, the wait
    from the earliest gated pod, the GPUs, Kueue's reason and the tier."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for p in raw_pods:
        m = p["metadata"]
        if not p["spec"]["schedulingGates"]:
            continue
        groups[(m["namespace"], m["labels"].get(KUEUE_POD_GROUP_LABEL, m["name"]))].append(p)
    out = []
    for key, pods in groups.items():
        w = raw_workloads.get(key)
        since = min(p["metadata"]["created"] for p in pods)
        gpus = sum(p["spec"]["gpus"] for p in pods)
        expected = int(pods[0]["metadata"]["annotations"].get(KUEUE_POD_GROUP_TOTAL, "0") or 0)
        if w is None:
            why = f"held by Kueue: no Kueue Workload for pod group {key[1]} seen yet"
            prio = 0
        else:
            cq = w["status"]["admission"]["clusterQueue"] or local_queues.get(
                (key[0], w["spec"]["queueName"]), ""
            )
            qr = next(c for c in w["status"]["conditions"] if c["type"] == "QuotaReserved")
            why = f"held by Kueue: waiting for quota in ClusterQueue {cq} ({qr['message']})"
            prio = w["spec"]["priority"]
        gates = sorted({g["name"] for p in pods for g in p["spec"]["schedulingGates"]})
        out.append((tier_name(prio, ""), now - since, gpus, len(pods), expected, gates, why))
    out.sort(key=lambda r: -r[1])
    return len(out)


def traced_bytes_per_gated_object(groups: int, decoder: ObjectDecoder) -> float:
    """Return the bytes a state retains per tracked object (a gated pod or its group's Workload), decoded from
    API JSON through the Ingestor (tracemalloc), as bench/_kueue.py measures a Kueue Workload."""
    rnd = random.Random(5)
    created = 1_800_000_000.0
    pods_raw, workloads_raw = [], []
    for i in range(groups):
        ns = f"team-{i % 200:03d}"
        group = f"pg-{i}"
        gpus = rnd.choice([1, 2, 4, 8])
        members = []
        for j in range(PER_GROUP):
            t = created - rnd.uniform(60, 86400)
            body = o.pod(
                name=f"{group}-{j}",
                namespace=ns,
                created=t,
                gpus=gpus,
                priority=100_000,
                priority_class="batch",
                labels={
                    QUEUE_LABEL: "research",
                    KUEUE_POD_GROUP_LABEL: group,
                    go.KUEUE_MANAGED_LABEL: "true",
                },
                annotations={KUEUE_POD_GROUP_TOTAL: str(PER_GROUP)},
                conditions=[o.scheduling_gated(t)],
                scheduling_gates=list(GATES),
            )
            members.append((body["metadata"]["name"], body["metadata"]["uid"]))
            pods_raw.append(orjson.dumps(body))
        cls, value = CLASSES[i % 3]
        tpl = o.pod_template(gpus=gpus, priority_class="batch")
        body = go.group_workload(
            group=group,
            namespace=ns,
            queue="research",
            created=created,
            pods=members,
            template=tpl,
            priority=value,
            priority_class=cls,
        )
        # Held for quota, as Kueue's scheduler writes it (flavorassigner.go).
        body["status"] = {
            "conditions": [
                o.condition("QuotaReserved", "False", created + 1, reason="Pending", message=MESSAGE)
            ]
        }
        workloads_raw.append(orjson.dumps(body))
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    state = ClusterState()
    ing = Ingestor(state, decoder)
    ing.list_page("KueueWorkload", workloads_raw)
    ing.list_page("Pod", pods_raw)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(state.kueue.workloads) == groups, ing.skipped
    assert len(state.pods) == groups * PER_GROUP, ing.skipped
    del pods_raw, workloads_raw
    return traced / (groups * (PER_GROUP + 1))
