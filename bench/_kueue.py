"""The tick benchmark's Kueue Workloads (issue 13): 20,000 beside the 150,000 pods, most of them held.

Built as domain records, as bench/tick.py builds its pods; `raw_workloads` gives the reference the same
Workloads as API-shaped dicts (watchtower/simulator/forms/kueue/objects.py, shaped from Kueue's types). Three
quarters wait for admission with no pods (a few hundred requeued after a preemption), the rest are
admitted and their Jobs' pods run (among the 150,000). `traced_bytes_per_workload` decodes the same number
of Workload objects through the Ingestor and measures what the state retains, as bench/ingest.py does.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.forms.kueue.records import (
    ClusterQueue,
    KueuePreempted,
    KueueWorkload,
    LocalQueue,
    WorkloadPriorityClass,
)
from watchtower.domain.records import OwnerRef, Pod
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator import objects as o
from watchtower.simulator.forms.kueue import objects as ko

NewPod = Callable[..., Pod]
CLASSES = [("kueue-urgent", 1_000_000), ("kueue-normal", 500_000), ("kueue-batch", 100_000)]
MESSAGE = ko.pending_message("main", "default-flavor", 8)


@dataclass
class KueueKinds:
    workloads: list[KueueWorkload] = field(default_factory=list)
    cluster_queues: list[ClusterQueue] = field(default_factory=list)
    local_queues: list[LocalQueue] = field(default_factory=list)
    classes: list[WorkloadPriorityClass] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)


def build_kueue(rnd: random.Random, new: NewPod, now: float, *, workloads: int = 20_000) -> KueueKinds:
    """Return the Workloads, 50 ClusterQueues in 5 cohorts, a LocalQueue per team and the admitted ones' pods."""
    k = KueueKinds()
    k.classes = [WorkloadPriorityClass(n, v) for n, v in CLASSES]
    k.cluster_queues = [
        ClusterQueue(f"cq-{i:02d}", f"cohort-{i % 5}", 64, None, None, 64, 64, 0, 300, 40) for i in range(50)
    ]
    k.local_queues = [LocalQueue(f"team-{t:03d}", "research", f"cq-{t % 50:02d}") for t in range(200)]
    for i in range(workloads):
        ns = f"team-{i % 200:03d}"
        cls, value = CLASSES[i % 3]
        count, per_pod = rnd.choice([(1, 8), (2, 4), (4, 8)])
        created = now - rnd.uniform(60, 2 * 86400)
        owner = OwnerRef("Job", f"kjob-{i}", "batch/v1", f"kjob-uid-{i}")
        admitted = i % 4 == 3
        preempted = None
        if not admitted and i % 50 == 0:
            preempted = KueuePreempted("InClusterQueue", created + 600, f"kwl-uid-{i + 1}", "/cohort-0/cq-00")
        w = KueueWorkload(
            ns,
            f"job-kjob-{i}-{i % 99991:05x}",
            f"kwl-uid-{i}",
            created,
            owner,
            "research",
            f"cq-{i % 50:02d}" if admitted else "",
            value,
            cls,
            "WorkloadPriorityClass",
            "batch",
            None,
            count,
            count * per_pod,
            per_pod,
            reserved=admitted,
            quota_changed=created + (30 if admitted else 1),
            admitted=admitted,
            admitted_at=created + 30 if admitted else None,
            reason="QuotaReserved" if admitted else "Pending",
            message="Quota reserved in ClusterQueue cq" if admitted else MESSAGE,
            evicted_reason="Preempted" if preempted else "",
            preempted=preempted,
            evictions=1 if preempted else 0,
        )
        k.workloads.append(w)
        if admitted:
            for j in range(count):
                k.pods.append(
                    new(
                        ns, f"kjob-{i}-{j}", owner=owner, pending=False, gpus=per_pod, prio=(100_000, "batch")
                    )
                )
    return k


def load_kueue(state: ClusterState, k: KueueKinds) -> None:
    for pc in k.classes:
        state.forms.kueue.upsert_priority_class(pc)
    for q in k.cluster_queues:
        state.forms.kueue.upsert_cluster_queue(q)
    for lq in k.local_queues:
        state.forms.kueue.upsert_local_queue(lq)
    for w in k.workloads:
        state.forms.kueue.upsert_workload(w)


def raw_workloads(k: KueueKinds) -> list[dict[str, Any]]:
    """The reference's Workloads: API-shaped dicts with the fields the work reads."""
    out = []
    for w in k.workloads:
        conds = [
            {
                "type": "QuotaReserved",
                "status": "True" if w.reserved else "False",
                "reason": w.reason,
                "message": w.message,
                "at": w.quota_changed,
            }
        ]
        if w.preempted is not None:
            conds.append(
                {"type": "Preempted", "status": "True", "reason": w.preempted.reason, "at": w.preempted.at}
            )
        per = w.gpus_per_pod
        out.append(
            {
                "metadata": {
                    "namespace": w.namespace,
                    "name": w.name,
                    "created": w.created,
                    "ownerReferences": [{"kind": "Job", "name": w.owner.name if w.owner else ""}],
                },
                "spec": {
                    "queueName": w.local_queue,
                    "priority": w.priority,
                    "podSets": [{"count": w.pods, "gpus": per}],
                },
                "status": {"conditions": conds, "admission": {"clusterQueue": w.cluster_queue}},
            }
        )
    return out


def naive_kueue(
    raw: list[dict[str, Any]],
    local_queues: dict[tuple[str, str], str],
    tier_name: Callable[[int, str], str],
    now: float,
) -> int:
    """The reference's Kueue work: each Workload's conditions walked, its queue, GPUs, tier and wait."""
    out = []
    for w in raw:
        m, spec, st = w["metadata"], w["spec"], w["status"]
        qr = next(c for c in st["conditions"] if c["type"] == "QuotaReserved")
        if qr["status"] == "True":
            continue
        cq = st["admission"]["clusterQueue"] or local_queues.get((m["namespace"], spec["queueName"]), "")
        gpus = sum(ps["count"] * ps["gpus"] for ps in spec["podSets"])
        evicted = any(c["type"] == "Preempted" for c in st["conditions"])
        since = qr["at"] if evicted else m["created"]
        why = f"held by Kueue in ClusterQueue {cq}: {qr['message']}"
        out.append((tier_name(spec["priority"], ""), now - since, gpus, why))
    out.sort(key=lambda r: -r[1])
    return len(out)


def traced_bytes_per_workload(n: int, decoder: ObjectDecoder) -> float:
    """Return the bytes a state retains per Kueue Workload decoded from API JSON (tracemalloc)."""
    rnd = random.Random(3)
    tpl = o.pod_template(gpus=4, priority_class="batch")
    raws = []
    for i in range(n):
        ns = f"team-{i % 200:03d}"
        job = o.job(name=f"kjob-{i}", namespace=ns, created=1_800_000_000.0, template=tpl, suspend=True)
        job["spec"]["parallelism"] = rnd.choice([1, 2, 4])
        raws.append(
            orjson.dumps(
                ko.workload(
                    job=job,
                    queue="research",
                    created=1_800_000_000.0 - rnd.uniform(60, 86400),
                    priority=CLASSES[i % 3][1],
                    priority_class=CLASSES[i % 3][0],
                    pending=(1_800_000_000.0, MESSAGE),
                )
            )
        )
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    state = ClusterState()
    ing = Ingestor(state, decoder)
    ing.list_page("KueueWorkload", raws)
    gc.collect()
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    assert len(state.kueue.workloads) == n, ing.skipped
    del raws
    return traced / n
