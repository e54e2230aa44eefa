"""Scenarios 2, 3 and 5: why work waits, in the real scheduler's own words, and what Watchtower makes of it."""

from __future__ import annotations

import time

import pytest

from tests.e2e.scenario import Scenario, pod_manifest

pytestmark = pytest.mark.e2e


def _scheduled(pod: dict) -> dict:
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def _workload(doc: dict, name: str) -> dict:
    return next(w for w in doc["workloads"] if w["name"] == name)


def test_request_no_node_fits_while_total_free_would_is_reported_as_fragmentation(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-f1", gpus=4)
    s.node("gpu-f2", gpus=4)
    ns = s.namespace("e2e-frag", team="nlp")
    # Two GPUs used on each node: four free in total, two on any one node.
    for i, node in enumerate(("gpu-f1", "gpu-f2")):
        s.pod(ns, pod_manifest(f"filler-{i}", gpus=2, priority_class="batch", node=node))
    s.wait_running(ns, ["filler-0", "filler-1"])
    s.pod(ns, pod_manifest("wide", gpus=4, priority_class="batch"))
    pod = s.wait_unschedulable(ns, "wide", "Insufficient nvidia.com/gpu")
    message = _scheduled(pod)["message"]

    doc = s.analyze("fragmented")

    assert doc["fragmentation"] == [
        {
            "namespace": ns,
            "name": "wide",
            "kind": "Pod",
            "gpus_requested": 4,
            "free_gpus_total": 4,
            "largest_free_on_one_node": 2,
        }
    ]
    w = _workload(doc, "wide")
    assert w["message"] == message
    assert w["nodes_total"] == 2
    # v1.36 puts the DRA plugin's post-filter words ("no new claims to deallocate,") after the reasons.
    assert [(r["reason"], r["nodes"]) for r in w["reasons"]] == [("Insufficient nvidia.com/gpu", 2)]
    # Same priority everywhere: nothing to evict.
    assert w["preemption"] == "no_victims", message
    s.save_fixture("pod-unschedulable-fragmented", pod)
    s.save_fixture(
        "fragmented-nodes-and-fillers",
        {
            "kind": "List",
            "apiVersion": "v1",
            "items": [
                {**o, "kind": "Node", "apiVersion": "v1"}
                for o in s.api.items("/api/v1/nodes")
                if o["metadata"]["name"] in ("gpu-f1", "gpu-f2")
            ]
            + [{**s.get_pod(ns, f"filler-{i}"), "kind": "Pod", "apiVersion": "v1"} for i in range(2)],
        },
    )


def test_preemption_policy_never_and_a_too_big_request_get_the_schedulers_verdicts(
    scenario: Scenario,
) -> None:
    s = scenario
    s.node("gpu-v1", gpus=4)
    s.node("gpu-v2", gpus=4)
    ns = s.namespace("e2e-verdicts", team="speech")
    for i in range(2):
        s.pod(ns, pod_manifest(f"busy-{i}", gpus=4, priority_class="batch"))
    s.wait_running(ns, ["busy-0", "busy-1"])
    s.pod(ns, pod_manifest("polite", gpus=4, priority_class="long-training"))
    s.pod(ns, pod_manifest("huge", gpus=16, priority_class="urgent-debug"))
    polite = s.wait_unschedulable(ns, "polite", "preemption:")
    huge = s.wait_unschedulable(ns, "huge", "preemption:")
    assert polite["spec"]["preemptionPolicy"] == "Never"  # filled in by admission from the class

    doc = s.analyze("verdicts")

    p = _workload(doc, "polite")
    assert p["message"] == _scheduled(polite)["message"]
    assert "not eligible due to preemptionPolicy=Never" in p["message"]
    assert p["preemption"] == "policy_never"
    assert p["tier"] == "low"
    h = _workload(doc, "huge")
    assert h["message"] == _scheduled(huge)["message"]
    assert "Preemption is not helpful for scheduling" in h["message"], h["message"]
    assert h["preemption"] == "not_helpful"
    assert h["tier"] == "critical"
    assert [(r["reason"], r["nodes"]) for r in h["reasons"]] == [("Insufficient nvidia.com/gpu", 2)]
    # The busy pods were not touched: nothing was preempted for either.
    assert doc["preemptions"] == []
    s.save_fixture("pod-unschedulable-policy-never", polite)
    s.save_fixture("pod-unschedulable-not-helpful", huge)


def test_scheduling_gated_pod_waits_behind_its_named_gate_and_is_alerted(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-g1", gpus=4)
    ns = s.namespace("e2e-gated", team="ranking")
    s.pod(ns, pod_manifest("held", gpus=1, priority_class="urgent-debug", gates=["example.com/quota-check"]))
    pod = s.get_pod(ns, "held")
    cond = _scheduled(pod)
    # The API server itself writes this condition at creation; the scheduler never sees the pod.
    assert (cond["status"], cond["reason"]) == ("False", "SchedulingGated")

    # Long after the critical tier's thresholds (5 and 15 minutes).
    doc = s.analyze("gated", at=time.time() + 2 * 3600)

    assert doc["gated_pods"] == 1
    w = _workload(doc, "held")
    # Issue 30: a gate no known system owns holds waiting work, named, alerted at its tier's thresholds.
    assert w["state"] == "pending"
    assert w["pods_gated"] == 1 and w["pods_pending"] == 0
    assert w["severity"] == "critical"
    assert w["scheduling_reason"] == "SchedulingGated"
    assert w["why"].startswith("held by scheduling gate example.com/quota-check since ")
    assert (w["gated"]["owner"], w["gated"]["gates"]) == ("other", ["example.com/quota-check"])
    s.save_fixture("pod-scheduling-gated", pod)
