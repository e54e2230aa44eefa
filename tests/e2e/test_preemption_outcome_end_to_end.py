"""Whether a preemption helped, on the real kube-scheduler: a preemptor that lands where its victims were, and
one that binds on another node because room appeared there first while its victims were still terminating
(the nomination is no reservation: PodStatus.nominatedNodeName "does not guarantee that the pod will be
scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available
sooner")."""

from __future__ import annotations

import time

import pytest

from tests.e2e.api import wait_for
from tests.e2e.scenario import Scenario

pytestmark = pytest.mark.e2e


def _preempting(s: Scenario, low: str, crit: str, victims: int) -> tuple[list[dict], dict]:
    def seen() -> tuple[list[dict], dict] | None:
        going = [p for p in s.pods(low) if p["metadata"].get("deletionTimestamp")]
        pre = s.get_pod(crit, "debug-worker-0")
        if (
            len(going) == victims
            and pre["status"].get("nominatedNodeName")
            and not pre["spec"].get("nodeName")
        ):
            return going, pre
        return None

    return wait_for("victims terminating and the preemptor nominated", seen)


def _running(s: Scenario, crit: str) -> dict:
    def bound() -> dict | None:
        p = s.get_pod(crit, "debug-worker-0")
        return p if p["status"].get("phase") == "Running" else None

    return wait_for("the preemptor running", bound, timeout=90)


def test_a_preemptor_that_starts_where_its_victims_were_helped(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-h1", gpus=4)
    s.node("gpu-h2", gpus=4)
    low = s.namespace("e2e-helped-low", team="vision")
    crit = s.namespace("e2e-helped-crit", team="oncall")
    workers = s.gang(low, "resnet", workers=4, gpus=2, priority_class="batch", terminate_seconds=3)
    s.wait_running(low, [w["metadata"]["name"] for w in workers])
    s.gang(crit, "debug", workers=1, gpus=4, priority_class="urgent-debug")
    victims, nominated = _preempting(s, low, crit, 2)
    node = nominated["status"]["nominatedNodeName"]
    running = _running(s, crit)
    assert running["spec"]["nodeName"] == node

    doc = s.analyze("helped")
    assert {p["victim_uid"] for p in doc["preemptions"]} == {v["metadata"]["uid"] for v in victims}
    for p in doc["preemptions"]:
        o = p["outcome"]
        assert (o["verdict"], o["reason"], o["node"], o["victim_nodes"]) == ("helped", None, node, [node])
        assert o["words"] == f"helped: started on {node}"


def test_a_preemptor_that_binds_on_another_node_did_not_help_and_names_it(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-e1", gpus=4)
    s.node("gpu-e2", gpus=4)
    low = s.namespace("e2e-elsewhere-low", team="vision")
    crit = s.namespace("e2e-elsewhere-crit", team="oncall")
    # The victims checkpoint for 60 s: long enough for room to appear on the other node first.
    workers = s.gang(low, "resnet", workers=4, gpus=2, priority_class="batch", terminate_seconds=60)
    s.wait_running(low, [w["metadata"]["name"] for w in workers])
    time.sleep(3)  # the victims run a while: their lost GPU-hours are more than the clock's 1 s resolution
    s.gang(crit, "debug", workers=1, gpus=4, priority_class="urgent-debug")
    victims, nominated = _preempting(s, low, crit, 2)
    node = nominated["status"]["nominatedNodeName"]
    # The other node's pods finish at once (their job deleted them): room there before the victims are gone.
    for p in s.pods(low):
        if p["spec"].get("nodeName") not in (None, node) and not p["metadata"].get("deletionTimestamp"):
            s.api.delete(f"/api/v1/namespaces/{low}/pods/{p['metadata']['name']}", grace=0)
    running = _running(s, crit)
    elsewhere = running["spec"]["nodeName"]
    assert elsewhere != node, "the scheduler should bind where room appeared first"
    assert {p["metadata"]["uid"] for p in s.pods(low)} >= {v["metadata"]["uid"] for v in victims}, (
        "the victims must still be terminating when the preemptor binds elsewhere"
    )

    doc = s.analyze("started-elsewhere")
    assert {p["victim_uid"] for p in doc["preemptions"]} == {v["metadata"]["uid"] for v in victims}
    for p in doc["preemptions"]:
        o = p["outcome"]
        assert (o["verdict"], o["reason"], o["node"], o["victim_nodes"]) == (
            "did_not_help",
            "started_elsewhere",
            elsewhere,
            [node],
        )
        assert o["words"] == f"did not help: started on {elsewhere}, not on {node}"
        assert o["victims"] == 2 and o["gpu_hours_lost"] > 0
        assert p["gpu_hours_lost"] > 0
    s.save_fixture("preemptor-started-elsewhere", running)
