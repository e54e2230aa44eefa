"""Kueue's two API versions through the adapter: v1beta2 (the only one Kueue serves from v0.20) and v1beta1
(older clusters) read to the same records, and the source watches whichever version the cluster serves.

The objects are tests/fixtures/real/kueue/shaped-v1beta2.json and shaped-v1beta1.json: one cluster's Kueue
objects written in each version's field names (sources in tests/fixtures/real/README.md).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import FIXTURES
from tests.unit.adapters.kube.conftest import SERVED, running, until
from tests.unit.adapters.kube.fake_apiserver import FakeApiServer
from watchtower.adapters.kube.decoder import ObjectDecoder

KUEUE = FIXTURES / "real" / "kueue"
dec = ObjectDecoder()
KINDS = {
    "WorkloadPriorityClass": ("WorkloadPriorityClass", "workloadpriorityclasses"),
    "ClusterQueue": ("ClusterQueue", "clusterqueues"),
    "LocalQueue": ("LocalQueue", "localqueues"),
    "Workload": ("KueueWorkload", "workloads"),
}


def items(version: str) -> list[dict[str, Any]]:
    doc: dict[str, Any] = json.loads((KUEUE / f"shaped-{version}.json").read_text())
    return doc["items"]


def decoded(version: str) -> dict[tuple[str, str], Any]:
    return {
        (o["kind"], o["metadata"]["name"]): dec.decode(KINDS[o["kind"]][0], json.dumps(o).encode())
        for o in items(version)
    }


def path(version: str, kind: str) -> str:
    return f"/apis/kueue.x-k8s.io/{version}/{KINDS[kind][1]}"


def test_the_fixtures_use_each_versions_own_field_names() -> None:
    """What differs between the two (sigs.k8s.io/kueue apis/kueue/v1beta1/*_conversion.go), so that the
    test below reads both spellings."""
    new = {(o["kind"], o["metadata"]["name"]): o for o in items("v1beta2")}
    old = {(o["kind"], o["metadata"]["name"]): o for o in items("v1beta1")}
    assert new.keys() == old.keys()
    assert new[("ClusterQueue", "research-cq")]["spec"]["cohortName"] == "research"
    assert old[("ClusterQueue", "research-cq")]["spec"]["cohort"] == "research"
    assert "flavorsUsage" in new[("LocalQueue", "team-queue")]["status"]
    assert "flavorUsage" in old[("LocalQueue", "team-queue")]["status"]
    assert new[("Workload", "job-train-5c2f1")]["spec"]["priorityClassRef"]["kind"] == "WorkloadPriorityClass"
    assert old[("Workload", "job-train-5c2f1")]["spec"]["priorityClassSource"] == (
        "kueue.x-k8s.io/workloadpriorityclass"
    )


def test_v1beta2_and_v1beta1_objects_read_to_the_same_records() -> None:
    new, old = decoded("v1beta2"), decoded("v1beta1")
    assert new == old

    cq = new[("ClusterQueue", "research-cq")]
    assert (cq.name, cq.cohort, cq.nominal_gpus, cq.borrowing_limit_gpus, cq.lending_limit_gpus) == (
        "research-cq",
        "research",
        16,
        8,
        4,
    )
    assert (cq.reserved_gpus, cq.used_gpus, cq.pending, cq.admitted, cq.stopped) == (8, 8, 1, 1, False)
    lq = new[("LocalQueue", "team-queue")]
    assert (lq.namespace, lq.cluster_queue, lq.pending, lq.admitted) == ("research", "research-cq", 1, 1)
    assert new[("WorkloadPriorityClass", "research-high")].value == 500_000

    train = new[("Workload", "job-train-5c2f1")]
    assert (train.local_queue, train.cluster_queue, train.pods, train.gpus, train.gpus_per_pod) == (
        "team-queue",
        "",
        2,
        16,
        8,
    )
    assert (train.priority, train.priority_class, train.priority_class_kind) == (
        500_000,
        "research-high",
        "WorkloadPriorityClass",
    )
    assert (train.reserved, train.admitted, train.reason) == (False, False, "Pending")
    assert train.message.endswith("8 more needed")
    assert train.waiting

    ev = new[("Workload", "job-eval-9a7d3")]
    assert (ev.cluster_queue, ev.admitted, ev.priority_class, ev.priority_class_kind) == (
        "research-cq",
        True,
        "batch",
        "PriorityClass",
    )
    assert ev.evictions == 1 and ev.pods_ready_at is not None
    assert not ev.waiting


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
async def test_the_source_watches_the_kueue_version_the_cluster_serves(version: str, tmp_path: Path) -> None:
    """A Kueue v0.20 cluster serves v1beta2 only, one before v0.15 v1beta1 only: the source lists the one
    served, asking v1beta1 only when v1beta2 is not found."""
    paths = {kind: path(version, kind) for kind in KINDS}
    server = FakeApiServer([*SERVED, *paths.values()]).start()
    try:
        for o in items(version):
            server.put(paths[o["kind"]], o)
        async with running(server, tmp_path) as r:
            for kind in KINDS.values():
                await until(
                    lambda k=kind[0]: r.source.kind_health(k).connected, f"{kind[0]} watched at {version}"
                )
            assert {r.source.served_path(k[0]) for k in KINDS.values()} == set(paths.values())
            await until(lambda: len(r.state.kueue.workloads) == 2, "both Workloads in the state")
            train = next(w for w in r.state.kueue.workloads.values() if w.name == "job-train-5c2f1")
            assert (train.priority_class, train.priority_class_kind) == (
                "research-high",
                "WorkloadPriorityClass",
            )
            asked = [p for _, p, _ in server.requests]
            if version == "v1beta2":
                assert not any("/kueue.x-k8s.io/v1beta1/" in p for p in asked), asked
            else:
                assert asked.count(path("v1beta2", "Workload")) == 1  # tried once, then the older version
    finally:
        server.stop()
