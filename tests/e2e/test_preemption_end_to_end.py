"""Scenario 1: low-tier gangs fill the GPUs, a critical job arrives, the real scheduler preempts."""

from __future__ import annotations

import time
from datetime import datetime

import pytest

from tests.e2e.api import wait_for
from tests.e2e.scenario import Scenario

pytestmark = pytest.mark.e2e


def _t(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp()


def _condition(pod: dict, type_: str) -> dict | None:
    return next((c for c in pod["status"].get("conditions", []) if c["type"] == type_), None)


def test_scheduler_preemption_is_reported_with_victims_preemptor_gpu_hours_and_critical_wait(
    scenario: Scenario,
) -> None:
    s = scenario
    s.node("gpu-a1", gpus=4)
    s.node("gpu-a2", gpus=4)
    low = s.namespace("e2e-preempt-low", team="vision")
    crit = s.namespace("e2e-preempt-crit", team="oncall")
    # Victims checkpoint for a while: the dump below catches them terminating, condition and all.
    workers = s.gang(low, "resnet", workers=4, gpus=2, priority_class="batch", terminate_seconds=8)
    s.wait_running(low, [w["metadata"]["name"] for w in workers])
    time.sleep(3)  # let the victims accumulate some GPU time before they lose it

    debug = s.gang(crit, "debug", workers=1, gpus=4, priority_class="urgent-debug")[0]
    debug_uid = debug["metadata"]["uid"]

    def preempted() -> list[dict] | None:
        victims = [p for p in s.pods(low) if p["metadata"].get("deletionTimestamp")]
        pre = s.get_pod(crit, "debug-worker-0")
        events = s.events(low, "Preempted")
        if len(victims) == 2 and pre["status"].get("nominatedNodeName") and len(events) == 2:
            return victims
        return None

    victims = wait_for("two victims terminating, the preemptor nominated, two Preempted events", preempted)
    preemptor = s.get_pod(crit, "debug-worker-0")
    node = preemptor["status"]["nominatedNodeName"]
    assert preemptor["spec"].get("nodeName") is None, "the preemptor must wait for its victims to go"

    doc = s.analyze("during-preemption")

    by_victim = {p["victim_uid"]: p for p in doc["preemptions"]}
    assert set(by_victim) == {v["metadata"]["uid"] for v in victims}
    for v in victims:
        p = by_victim[v["metadata"]["uid"]]
        cond = _condition(v, "DisruptionTarget")
        assert cond is not None and cond["reason"] == "PreemptionByScheduler"
        assert p["reason"] == "PreemptionByScheduler"
        assert p["victim_name"] == v["metadata"]["name"]
        assert p["victim_workload"] == {"kind": "PaddleJob", "name": "resnet"}
        assert p["victim_tier"] == "low"
        assert p["node"] == v["spec"]["nodeName"] == node
        assert p["preemptor_uid"] == debug_uid
        assert p["preemptor_name"] == "debug-worker-0"
        assert p["preemptor_namespace"] == crit
        assert p["preemptor_tier"] == "critical"
        assert p["gpus"] == 2
        ran = _t(cond["lastTransitionTime"]) - _t(v["status"]["startTime"])
        assert ran >= 3
        assert p["ran_seconds"] == pytest.approx(ran)
        assert p["gpu_hours_lost"] == pytest.approx(2 * ran / 3600, abs=1e-6)

    critical = next(w for w in doc["workloads"] if w["name"] == "debug")
    assert critical["tier"] == "critical"
    assert critical["state"] == "pending"
    assert critical["nominated_node"] == node
    assert critical["preemption"] == "possible"
    assert critical["wait_seconds"] == pytest.approx(
        _t(doc["at"]) - _t(preemptor["metadata"]["creationTimestamp"]), abs=1
    )
    resnet = next(w for w in doc["workloads"] if w["name"] == "resnet")
    # Terminating victims still hold their GPUs on the node until the kubelet lets them go.
    assert resnet["gpus_held"] == 8
    assert doc["capacity"]["gpus_used"] == 8

    s.save_fixture("preemption-victim-terminating", victims[0])
    s.save_fixture("preemptor-nominated", preemptor)
    s.save_fixture(
        "preempted-events-core-v1", {"kind": "List", "apiVersion": "v1", "items": s.events(low, "Preempted")}
    )
    s.save_fixture(
        "preempted-events-events-k8s-io-v1",
        {
            "kind": "List",
            "apiVersion": "events.k8s.io/v1",
            "items": [
                e
                for e in s.api.items(f"/apis/events.k8s.io/v1/namespaces/{low}/events")
                if e.get("reason") == "Preempted"
            ],
        },
    )

    def bound() -> dict | None:
        p = s.get_pod(crit, "debug-worker-0")
        return p if p["status"].get("phase") == "Running" else None

    running = wait_for("the preemptor bound and running once its victims are gone", bound, timeout=60)
    assert running["spec"]["nodeName"] == node
    s.save_fixture("preemptor-running", running)

    after = s.analyze("after-preemption")
    # The victims are gone; the events still attribute them, once each.
    assert sorted(p["victim_uid"] for p in after["preemptions"]) == sorted(by_victim)
    assert all(p["preemptor_uid"] == debug_uid for p in after["preemptions"])
    critical_after = next(w for w in after["workloads"] if w["name"] == "debug")
    assert critical_after["state"] == "running"
    tiers = {row["tier"]: row for row in after["latency"]}
    waited = _t(_condition(running, "PodScheduled")["lastTransitionTime"]) - _t(
        running["metadata"]["creationTimestamp"]
    )
    assert tiers["critical"]["time_to_schedule_seconds"]["count"] == 1
    assert tiers["critical"]["time_to_schedule_seconds"]["max"] == pytest.approx(waited)
    resnet_after = next(w for w in after["workloads"] if w["name"] == "resnet")
    assert resnet_after["gpus_held"] == 4 and resnet_after["pods_running"] == 2
