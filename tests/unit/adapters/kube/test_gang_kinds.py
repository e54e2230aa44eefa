"""The gang kinds through the adapter: each version decoded, the served version found, absence no error."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.fixtures import FIXTURES
from tests.unit.adapters.kube.conftest import SERVED, running, until
from tests.unit.adapters.kube.fake_apiserver import FakeApiServer
from watchtower.adapters.kube.decoder import DecodeError, ObjectDecoder
from watchtower.domain.forms.gangs.records import REF_PODGROUP, REF_VOLCANO, REF_WORKLOAD, GroupRef
from watchtower.simulator import objects as o

REAL = FIXTURES / "real"
dec = ObjectDecoder()
WORKLOAD_V1ALPHA1 = "/apis/scheduling.k8s.io/v1alpha1/workloads"
WORKLOAD_V1ALPHA2 = "/apis/scheduling.k8s.io/v1alpha2/workloads"


def load(name: str) -> Any:
    return json.loads((REAL / f"{name}.json").read_text())


def raw(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def test_a_135_workload_and_a_136_workload_give_the_same_gang_minimum() -> None:
    old = dec.decode("Workload", raw(load("workload-v1alpha1-gang")))
    new = dec.decode("Workload", raw(load("workload-v1alpha2-templates")))
    assert old.min_counts == (("workers", 4), ("driver", 0))  # a basic policy is no gang
    assert new.min_counts == (("workers", 4),)
    assert old.min_count("workers") == new.min_count("workers") == 4


def test_an_upstream_podgroup_reads_both_names_of_its_scheduled_condition() -> None:
    incomplete = dec.decode("PodGroup", raw(load("podgroup-v1alpha2-gang-incomplete")))
    assert (incomplete.min_count, incomplete.scheduled, incomplete.message) == (4, False, "")
    assert dec.decode("PodGroup", raw(load("podgroup-v1alpha2-scheduled"))).scheduled
    old_name = load("podgroup-v1alpha2-scheduled")
    old_name["status"]["conditions"][0]["type"] = "PodGroupScheduled"
    assert dec.decode("PodGroup", raw(old_name)).scheduled
    refused = dec.decode("PodGroup", raw(load("podgroup-v1alpha2-unschedulable")))
    assert refused.reason == "Unschedulable" and refused.message.startswith("0/4 nodes are available")


def test_a_volcano_podgroup_and_queue_keep_what_a_decision_needs() -> None:
    g = dec.decode("VolcanoPodGroup", raw(load("volcano-podgroup-shaped")))
    assert (g.min_count, g.queue, g.priority_class, g.phase, g.reason) == (
        4,
        "vision-q",
        "experiment",
        "Pending",
        "NotEnoughResources",
    )
    q = dec.decode("VolcanoQueue", raw(load("volcano-queue")))
    assert (q.name, q.weight, q.capability_gpus, q.deserved_gpus, q.guarantee_gpus, q.allocated_gpus) == (
        "vision-q",
        4,
        32,
        16,
        8,
        12,
    )


def test_a_paddlejob_keeps_its_creation_phase_counts_and_scheduling_policy() -> None:
    job = load("paddlejob-pending-no-pods")
    job["status"]["worker"] = {"pending": 1, "running": 2}
    c = dec.decode("PaddleJob", raw(job))
    assert (c.phase, c.pods_reported, c.min_available, c.queue, c.priority_class, c.pods, c.gpus) == (
        "Pending",
        3,
        4,
        "vision-q",
        "experiment",
        4,
        8,
    )
    assert c.created == 1_800_000_000.0


def test_a_pod_names_its_group_in_each_of_the_three_ways() -> None:
    base = o.pod(name="p", namespace="n", created=1.0e9)
    sg = json.loads(json.dumps(base))
    sg["spec"]["schedulingGroup"] = {"podGroupName": "g"}
    wr = json.loads(json.dumps(base))
    wr["spec"]["workloadRef"] = {"name": "w", "podGroup": "workers", "podGroupReplicaKey": "0"}
    vc = o.pod(name="p", namespace="n", created=1.0e9, annotations={"scheduling.k8s.io/group-name": "vg"})
    assert dec.decode("Pod", raw(sg)).group == GroupRef(REF_PODGROUP, "g")
    assert dec.decode("Pod", raw(wr)).group == GroupRef(REF_WORKLOAD, "w", "workers")
    assert dec.decode("Pod", raw(vc)).group == GroupRef(REF_VOLCANO, "vg")
    assert dec.decode("Pod", raw(base)).group is None
    # One shared reference per group, not one per pod.
    assert dec.decode("Pod", raw(sg)).group is dec.decode("Pod", raw(sg)).group


@pytest.mark.parametrize(
    ("method", "obj"),
    [
        ("PodGroup", {"kind": "PodGroup", "metadata": {"name": "g"}}),  # no namespace
        (
            "PodGroup",
            {
                "metadata": {"name": "g", "namespace": "n"},
                "spec": {"schedulingPolicy": {"gang": {"minCount": -1}}},
            },
        ),
        ("Workload", {"metadata": {"name": "w", "namespace": "n"}, "spec": {"podGroups": "all"}}),
        ("VolcanoPodGroup", {"metadata": {"name": "g", "namespace": "n"}, "spec": {"minMember": "four"}}),
        ("VolcanoQueue", {"metadata": {"name": "q"}, "spec": {"capability": {"nvidia.com/gpu": "lots"}}}),
        ("PaddleJob", {"metadata": {"name": "j", "namespace": "n"}, "status": {"worker": {"pending": -2}}}),
    ],
)
def test_a_malformed_gang_object_is_a_clear_decode_error(method: str, obj: dict[str, Any]) -> None:
    with pytest.raises(DecodeError):
        dec.decode(method, raw(obj))


async def test_a_135_cluster_serves_workload_at_v1alpha1_and_the_source_finds_it(tmp_path: Path) -> None:
    server = FakeApiServer([*SERVED, WORKLOAD_V1ALPHA1]).start()
    try:
        server.put(WORKLOAD_V1ALPHA1, load("workload-v1alpha1-gang"))
        async with running(server, tmp_path) as r:
            await until(lambda: r.source.kind_health("Workload").connected, "workloads watched at v1alpha1")
            assert r.source.served_path("Workload") == WORKLOAD_V1ALPHA1
            assert ("Workload", 1) in r.lists
            assert r.state.gangs.workloads[("vision", "trainer")].min_count("workers") == 4
            asked = [p for _, p, _ in server.requests]
            assert asked.count(WORKLOAD_V1ALPHA2) == 1  # tried once, then the older version
            # The alpha kinds this cluster lacks are absent, not failing, and readiness does not wait.
            for kind in ("PodGroup", "VolcanoPodGroup", "VolcanoQueue"):
                h = r.source.kind_health(kind)
                assert (h.present, h.consecutive_failures) == (False, 0)
            # The required kinds list on their own streams: the Workload may be watched before they are.
            await until(lambda: r.source.health()["healthy"] is True, "the required kinds listed")
    finally:
        server.stop()
