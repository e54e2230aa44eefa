"""GPUs through DRA: how claims, templates, classes and slices arriving in any order count a pod's GPUs.

Objects are shaped from the real captures in tests/fixtures/real/dra (same fields, values changed)."""

from __future__ import annotations

import copy
from typing import Any

import orjson
import pytest

from tests.fixtures import FIXTURES
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.change_log import ChangeCursor
from watchtower.domain.messages.scheduler import parse_scheduling_message
from watchtower.domain.state import ClusterState
from watchtower.ports import DecodeError

DRA = FIXTURES / "real" / "dra"
DEC = ObjectDecoder()


def objects(name: str) -> dict[tuple[str, str], dict[str, Any]]:
    items = orjson.loads((DRA / name).read_bytes())["items"]
    return {(i["kind"], i["metadata"]["name"]): i for i in items}


REAL = objects("gpus-all-taken.json")


def claim(name: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    c = copy.deepcopy(REAL[("ResourceClaim", "waiting-gpus")])
    c["metadata"]["name"] = name
    c["spec"]["devices"]["requests"] = requests
    return c


def feed(st: ClusterState, obj: dict[str, Any]) -> None:
    b = orjson.dumps(obj)
    kind = obj["kind"]
    if kind == "Pod":
        st.upsert_pod(DEC.decode("Pod", b))
    elif kind == "ResourceClaim":
        st.forms.dra.upsert_claim(DEC.decode("ResourceClaim", b))
    elif kind == "ResourceClaimTemplate":
        st.forms.dra.upsert_template(DEC.decode("ResourceClaimTemplate", b))
    elif kind == "ResourceSlice":
        st.forms.dra.upsert_slice(DEC.decode("ResourceSlice", b))
    elif kind == "DeviceClass":
        st.forms.dra.upsert_class(DEC.decode("DeviceClass", b))
    elif kind == "Node":
        st.upsert_node(DEC.decode("Node", b))


def test_a_claim_seen_after_its_pod_gives_the_pod_its_gpus_and_touches_its_workload() -> None:
    st = ClusterState()
    feed(st, REAL[("Pod", "waiting")])
    pod = next(p for p in st.pods.values() if p.name == "waiting")
    assert pod.gpus == 0  # nothing says yet what its claim asks
    cursor = ChangeCursor()
    cursor.read(st.log)  # what the first upsert touched is taken
    feed(st, REAL[("ResourceClaim", "waiting-gpus")])
    assert st.pods[pod.uid].gpus == 2 and st.pods[pod.uid].dra_gpus == 2
    assert cursor.read(st.log) == {st.workload_of_uid[pod.uid]}  # the next tick re-derives it
    # A pod MODIFIED after that is decoded without the claim's GPUs: the state adds them again.
    feed(st, REAL[("Pod", "waiting")])
    assert st.pods[pod.uid].gpus == 2


def test_a_bound_pods_claim_gpus_are_used_on_its_node_until_it_is_gone() -> None:
    st = ClusterState()
    feed(st, REAL[("ResourceClaim", "held-gpus")])
    feed(st, REAL[("Pod", "holder")])
    assert st.gpus_used == {"dra-gpu-1": 4}
    holder = next(p for p in st.pods.values() if p.name == "holder")
    st.delete_pod(holder.uid, DEC.decode("Pod", orjson.dumps(REAL[("Pod", "holder")])))
    assert st.gpus_used == {}


def test_a_template_counts_until_its_claim_is_made_then_the_claim_counts() -> None:
    st = ClusterState()
    pod = copy.deepcopy(REAL[("Pod", "templated")])
    pod["spec"].pop("nodeName", None)
    pod["status"] = {"phase": "Pending"}
    feed(st, REAL[("ResourceClaimTemplate", "four-gpus")])
    feed(st, pod)
    p = next(iter(st.pods.values()))
    assert p.gpus == 4
    assert "not created yet" in st.dra.held_by(p.namespace, p.claims)


def test_count_rules_exact_default_first_available_and_all() -> None:
    st = ClusterState()
    for o in (
        REAL[("DeviceClass", "gpu.nvidia.com")],
        *(v for k, v in REAL.items() if k[0] == "ResourceSlice"),
    ):
        feed(st, o)
    one = DEC.decode(
        "ResourceClaim",
        orjson.dumps(claim("one", [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com"}}])),
    )
    every = DEC.decode(
        "ResourceClaim",
        orjson.dumps(
            claim(
                "all",
                [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}],
            )
        ),
    )
    first = DEC.decode(
        "ResourceClaim",
        orjson.dumps(
            claim(
                "first",
                [
                    {
                        "name": "g",
                        "firstAvailable": [
                            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 3},
                            {"name": "nic", "deviceClassName": "nic.example.com", "count": 1},
                        ],
                    }
                ],
            )
        ),
    )
    nic = DEC.decode(
        "ResourceClaim",
        orjson.dumps(
            claim("nic", [{"name": "n", "exactly": {"deviceClassName": "nic.example.com", "count": 2}}])
        ),
    )
    # count unset: 1; All: every GPU one node's slices offer; firstAvailable: the first; a NIC: none.
    assert [st.dra.claim_gpus(c)[0] for c in (one, every, first, nic)] == [1, 4, 3, 0]


def test_slice_devices_of_another_type_are_not_gpus() -> None:
    st = ClusterState()
    feed(st, REAL[("DeviceClass", "gpu.nvidia.com")])
    s = copy.deepcopy(next(v for k, v in REAL.items() if k[0] == "ResourceSlice" and "dra-gpu-1" in k[1]))
    s["spec"]["devices"][0]["attributes"]["type"] = {"string": "mig"}  # a MIG partition, not a whole GPU
    feed(st, s)
    assert st.dra.node_gpus() == {"dra-gpu-1": 3}
    # An older generation of the pool, left over from an update, counts nothing.
    stale = copy.deepcopy(s)
    stale["metadata"]["name"] = "stale"
    stale["spec"]["pool"]["generation"] = 0
    s["spec"]["pool"]["generation"] = 1
    feed(st, s)
    feed(st, stale)
    assert st.dra.node_gpus() == {"dra-gpu-1": 3}


def test_a_negative_count_is_a_decode_error_not_a_crash() -> None:
    bad = claim("bad", [{"name": "g", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": -2}}])
    with pytest.raises(DecodeError, match="ResourceClaim"):
        DEC.decode("ResourceClaim", orjson.dumps(bad))


def test_a_quota_on_a_gpu_device_class_is_gpu_quota() -> None:
    q = {
        "kind": "ResourceQuota",
        "metadata": {"name": "gpus", "namespace": "e2e-dra", "uid": "q"},
        "status": {
            "hard": {
                "gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "8",
                "requests.nvidia.com/gpu": "2",
            },
            "used": {"gpu.nvidia.com.deviceclass.resource.k8s.io/devices": "6"},
        },
    }
    r = DEC.decode("ResourceQuota", orjson.dumps(q))
    assert (r.hard_gpus, r.used_gpus) == (10, 6)


@pytest.mark.parametrize(
    ("message", "reason"),
    [
        (
            '0/2 nodes are available: could not find ResourceClaim "e2e-dra/x". preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling.',
            "ResourceClaim not found",
        ),
        (
            '0/2 nodes are available: pod "e2e-dra/p": ResourceClaim not created yet.',
            "ResourceClaim not created yet",
        ),
        ('0/2 nodes are available: resourceclaim "x" is being deleted.', "ResourceClaim is being deleted"),
        (
            "claim e2e-dra/x, request gpus: could not retrieve device class gpu.nvidia.com: not found",
            "DeviceClass does not exist",
        ),
        (
            "class gpu.nvidia.com: selector #0: CEL compile error: undeclared reference",
            "DeviceClass or claim selector error",
        ),
        (
            "0/3 nodes are available: 1 resourceclaim not available on the node, 2 cannot allocate all claims.",
            "resourceclaim not available on the node",
        ),
    ],
)
def test_each_plugin_wording_is_read_into_its_reason(message: str, reason: str) -> None:
    d = parse_scheduling_message(message)
    assert d.recognised
    assert d.reasons[0].reason == reason


def test_unresolved_claims_follow_the_objects_as_they_come_and_go() -> None:
    st = ClusterState()
    feed(st, REAL[("DeviceClass", "gpu.nvidia.com")])
    templated = copy.deepcopy(REAL[("Pod", "templated")])
    del templated["status"]["resourceClaimStatuses"]  # the controller has not made its claim yet
    templated["spec"]["nodeName"] = ""
    templated["status"]["phase"] = "Pending"
    feed(st, templated)
    feed(st, REAL[("Pod", "waiting")])
    assert {(u.pod, u.reason) for u in st.unresolved_claims()} == {
        ("templated", "template_missing"),
        ("waiting", "claim_missing"),
    }
    feed(st, REAL[("ResourceClaimTemplate", "four-gpus")])
    feed(st, REAL[("ResourceClaim", "waiting-gpus")])
    assert st.unresolved_claims() == []
    deleting = copy.deepcopy(REAL[("ResourceClaim", "waiting-gpus")])
    deleting["metadata"]["deletionTimestamp"] = "2026-12-02T01:00:00Z"
    feed(st, deleting)
    [u] = st.unresolved_claims()
    assert (u.pod, u.reason, u.why) == (
        "waiting",
        "claim_deleting",
        "ResourceClaim waiting-gpus is being deleted",
    )
    # Bound or gone, a pod is no longer listed.
    st.delete_pod(next(p.uid for p in st.pods.values() if p.name == "waiting"))
    assert st.unresolved_claims() == []
