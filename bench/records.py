"""Retained memory per tracked object of issue 12's kinds: PodGroup, PaddleJob, JobSet, and a pod naming its group.

Each kind is decoded from API-shaped JSON by the Kubernetes adapter's decoder and applied through the
Ingestor into a fresh ClusterState, as a LIST page is; what stays allocated once the JSON and the wire
objects are gone (tracemalloc: the records, their strings, the state's tables and indexes, the decoder's
shared values) is divided by the number of objects. Shapes: k8s.io/api scheduling/v1alpha2 PodGroup,
paddle-operator api/v1/paddlejob_types.go, kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go
(built by watchtower/simulator/forms/jobset/objects.py), core/v1 pods with spec.schedulingGroup (1.36).

    .venv/bin/python bench/records.py [--n 2000]

Target (issue 12): <= 1 KB retained per tracked object.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tracemalloc
from collections.abc import Callable
from typing import Any

import msgspec
import orjson

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.records import Pod
from watchtower.domain.state import ClusterState
from watchtower.services.ingest import Ingestor
from watchtower.simulator import objects as o
from watchtower.simulator.forms.jobset.objects import child_jobs, jobset

T0 = 1_800_000_000.0
TEAMS = 50


def pod_group(i: int) -> dict[str, Any]:
    scheduled = i % 2 == 0
    cond = {
        "type": "PodGroupScheduled",
        "status": "True" if scheduled else "False",
        "reason": "Scheduled" if scheduled else "Unschedulable",
        "message": ""
        if scheduled
        else "0/400 nodes are available: 400 Insufficient nvidia.com/gpu. preemption: 0/400 nodes are "
        "available: 400 No preemption victims found for incoming pod.",
        "lastTransitionTime": o.ts(T0 - i),
    }
    return {
        "apiVersion": "scheduling.k8s.io/v1alpha2",
        "kind": "PodGroup",
        "metadata": {
            "name": f"trainer-{i}",
            "namespace": f"team-{i % TEAMS}",
            "uid": o.new_uid(f"pg/{i}"),
            "creationTimestamp": o.ts(T0 - 3600 - i),
            "resourceVersion": str(1000 + i),
        },
        "spec": {"schedulingPolicy": {"gang": {"minCount": 4}}},
        "status": {"conditions": [cond]},
    }


def paddle_job(i: int) -> dict[str, Any]:
    tpl = o.pod_template(gpus=8, cpu="16", memory="128Gi", priority_class="experiment")
    pj = o.paddle_job_object(
        name=f"ocr-train-{i}",
        namespace=f"team-{i % TEAMS}",
        created=T0 - 3600 - i,
        roles={"ps": (2, o.pod_template(gpus=0)), "worker": (4, tpl)},
        uid=o.new_uid(f"pj/{i}"),
    )
    pj["spec"]["schedulingPolicy"] = {
        "minAvailable": 6,
        "queue": f"q-{i % TEAMS}",
        "priorityClass": "experiment",
    }
    pj["status"] = {
        "phase": "Pending" if i % 3 else "Running",
        "mode": "PS",
        "ps": {"pending": 2},
        "worker": {"pending": 2, "running": 2},
    }
    return pj


def jobset_and_jobs(i: int) -> list[dict[str, Any]]:
    tpl = o.pod_template(gpus=8, cpu="16", memory="128Gi", priority_class="experiment")
    js = jobset(
        name=f"pretrain-{i}",
        namespace=f"team-{i % TEAMS}",
        created=T0 - 3600 - i,
        replicated_jobs={"node": (2, 4, tpl)},
        train_job=i % 3 == 0,
    )
    return [js, *child_jobs(js)]


def grouped_pod(i: int) -> dict[str, Any]:
    p = o.pod(
        name=f"trainer-{i // 4}-{i % 4}",
        namespace=f"team-{i // 4 % TEAMS}",
        created=T0 - 600 - i,
        uid=o.new_uid(f"pod/{i}"),
        gpus=8,
        cpu="16",
        memory="128Gi",
        priority=500_000,
        priority_class="experiment",
        owner=o.owner_ref("Job", f"trainer-{i // 4}", api_version="batch/v1", uid=o.new_uid(f"job/{i // 4}")),
    )
    p["spec"]["schedulingGroup"] = {"podGroupName": f"trainer-{i // 4}"}
    p["spec"]["schedulerName"] = "gang-scheduler" if i % 2 else "default-scheduler"
    return p


def retained(kind_objects: list[tuple[str, list[bytes]]]) -> tuple[int, ClusterState]:
    """Return the bytes still allocated after applying the objects to a fresh state, and the state."""
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    state = ClusterState()
    ingestor = Ingestor(state, ObjectDecoder(keep_annotations=frozenset({"watchtower.io/note"})))
    for kind, items in kind_objects:
        ingestor.list_page(kind, [msgspec.Raw(b) for b in items], first=True, last=True)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert not ingestor.skipped, dict(ingestor.skipped)
    return after - before, state


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000, help="objects of each kind")
    n = ap.parse_args().n

    def measure(
        what: str, kinds: list[tuple[str, list[bytes]]], count: Callable[[ClusterState], int]
    ) -> None:
        size, state = retained(kinds)
        objs = count(state)
        print(f"{what:34s}{size / objs:7.0f} B per object  ({objs:,} objects, {size / 1e6:.2f} MB)")

    dumps = orjson.dumps
    print("retained per tracked object (tracemalloc; target <= 1024 B):")
    measure(
        "upstream PodGroup",
        [("PodGroup", [dumps(pod_group(i)) for i in range(n)])],
        lambda s: len(s.gangs.pod_groups),
    )
    measure(
        "PaddleJob (with schedulingPolicy)",
        [("PaddleJob", [dumps(paddle_job(i)) for i in range(n)])],
        lambda s: len(s.control.controllers_of("PaddleJob")),
    )
    sets = [jobset_and_jobs(i) for i in range(n)]
    measure(
        "JobSet alone",
        [("JobSet", [dumps(x[0]) for x in sets])],
        lambda s: len(s.control.controllers_of("JobSet")),
    )
    measure(
        "JobSets with their 2 child Jobs each",
        [("JobSet", [dumps(x[0]) for x in sets]), ("Job", [dumps(j) for x in sets for j in x[1:]])],
        lambda s: len(s.control.controllers_of("JobSet")) + len(s.control.controllers_of("Job")),
    )
    pods = [dumps(grouped_pod(i)) for i in range(4 * n)]
    measure("pod naming its PodGroup (1.36)", [("Pod", pods)], lambda s: len(s.pods))
    plain = [
        dumps({**p, "spec": {k: v for k, v in p["spec"].items() if k != "schedulingGroup"}})
        for p in map(orjson.loads, pods)
    ]
    measure("the same pods, no group", [("Pod", plain)], lambda s: len(s.pods))
    p = Pod("u", "ns", "name", 0.0)
    print(
        f"Pod record itself: {sys.getsizeof(p)} B, {len(Pod.__struct_fields__)} fields (scheduler and group: "
        "16 B of slots; their values are shared per name and per group)"
    )


if __name__ == "__main__":
    main()
