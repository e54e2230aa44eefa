"""DRA GPUs read from real objects (tests/fixtures/real/dra, captured from the real API server and scheduler
by tests/e2e/capture_dra.py): what `analyze` reports for a dump of them."""

from __future__ import annotations

from typing import Any

from tests.fixtures import FIXTURES
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.config.model import Settings
from watchtower.services.analyze import analysis_dict, analyze

DRA = FIXTURES / "real" / "dra"
POLICY = Settings().queue_policy()


def report(name: str, *, classes: frozenset[str] = frozenset({"gpu.nvidia.com"})) -> dict[str, Any]:
    data = (DRA / name).read_bytes()
    a = analyze(data, policy=POLICY, decoder=ObjectDecoder(), at=None, gpu_classes=classes)
    assert not a.ingestor.skipped
    return analysis_dict(a, POLICY)


def workload(d: dict[str, Any], name: str) -> dict[str, Any]:
    return next(w for w in d["workloads"] if w["name"] == name)


def test_a_pod_asking_gpus_only_through_a_claim_waits_for_gpus_in_the_plugins_words() -> None:
    d = report("gpus-all-taken.json")
    w = workload(d, "waiting")
    assert w["state"] == "pending"
    assert (w["gpus_requested"], w["gpus_per_pod"], w["gpus_held"]) == (2, 2, 0)
    assert w["gpu_claims"] == [
        {
            "name": "waiting-gpus",
            "device_class": "gpu.nvidia.com",
            "count": 2,
            "allocated": False,
            "devices": [],
        }
    ]
    assert w["dra_problem"] == "shortage"
    assert [(r["reason"], r["nodes"]) for r in w["reasons"]] == [("cannot allocate all claims", 2)]
    assert "2 nodes lack 2 free GPUs" in w["why"]
    assert w["preemption"] == "not_helpful"


def test_slice_gpus_are_node_capacity_and_allocated_claims_use_it() -> None:
    cap = report("gpus-all-taken.json")["capacity"]
    # The nodes publish no nvidia.com/gpu: every GPU here is a ResourceSlice device.
    assert (cap["gpus_allocatable"], cap["gpus_used"], cap["gpus_free"]) == (8, 8, 0)
    assert {n["name"]: (n["allocatable"], n["used"]) for n in cap["nodes"]} == {
        "dra-gpu-1": (4, 4),
        "dra-gpu-2": (4, 4),
    }


def test_a_template_claim_is_counted_from_the_claim_the_controller_made_with_its_devices() -> None:
    w = workload(report("template-claim-allocated.json"), "templated")
    assert (w["state"], w["gpus_held"]) == ("running", 4)
    [claim] = w["gpu_claims"]
    assert claim["name"].startswith("templated-gpus-") and claim["allocated"]
    assert sorted(claim["devices"]) == [f"gpu.nvidia.com/dra-gpu-2/gpu-{i}" for i in range(4)]


def test_a_finished_holder_gives_its_gpus_back_and_the_waiting_claim_runs() -> None:
    d = report("claim-allocated-after-holder-finished.json")
    assert workload(d, "waiting")["state"] == "running"
    assert all(w["name"] != "holder" for w in d["workloads"])
    assert {n["name"]: n["used"] for n in d["capacity"]["nodes"]} == {"dra-gpu-1": 2, "dra-gpu-2": 4}


def test_a_configured_gpu_class_the_cluster_lacks_is_a_configuration_problem() -> None:
    # The class named in gpu.device_classes has no DeviceClass object (its driver's chart not installed).
    d = report("missing-deviceclass.json", classes=frozenset({"gpu.nvidia.com", "missing.nvidia.com"}))
    w = workload(d, "no-class")
    assert w["state"] == "pending" and w["gpus_requested"] == 1
    assert w["dra_problem"] == "config"
    assert "device class missing.nvidia.com does not exist" in w["why"]
    assert "configuration problem" in w["why"]
    # Capacity is unchanged: no slice device belongs to a class that does not exist.
    assert d["capacity"]["gpus_allocatable"] == 8


def test_a_claim_on_a_class_that_is_not_a_gpu_class_is_not_gpu_work() -> None:
    assert all(w["name"] != "no-class" for w in report("missing-deviceclass.json")["workloads"])


def test_a_pod_naming_a_claim_that_does_not_exist_is_listed_with_the_claim_named() -> None:
    """The plugin holds it before the queue with no condition and no event: only the objects say why."""
    d = report("missing-claim.json")
    assert all(w["name"] != "no-claim" for w in d["workloads"])  # its GPUs are unknown
    [p] = d["dra_problems"]
    assert (p["namespace"], p["pod"], p["reason"]) == ("e2e-dra", "no-claim", "claim_missing")
    assert p["why"] == "ResourceClaim absent-gpus does not exist"
    assert p["pending_seconds"] >= 0


def test_a_claim_on_a_device_class_that_does_not_exist_is_listed_even_when_it_is_no_gpu_class() -> None:
    [p] = report("missing-deviceclass.json")["dra_problems"]
    assert (p["pod"], p["reason"]) == ("no-class", "class_missing")
    assert "DeviceClass missing.nvidia.com" in p["why"]


def test_pods_whose_claims_resolve_are_not_listed() -> None:
    assert report("gpus-all-taken.json")["dra_problems"] == []
    assert report("template-claim-allocated.json")["dra_problems"] == []
