"""Work that can never start as the cluster is configured, on the real control plane (issue 30 part 2):
a pod asking more GPUs than any node has, and a ResourceQuota whose hard is below one pod's ask, each
reported as never with its own numbers; a pod waiting for busy nodes of its size is not; a big node listed
clears it."""

from __future__ import annotations

import pytest

from tests.e2e.api import wait_for
from tests.e2e.scenario import Scenario, pod_manifest

pytestmark = pytest.mark.e2e


def _workload(doc: dict, name: str) -> dict | None:
    return next((w for w in doc["workloads"] if w["name"] == name), None)


def _never_alerts(doc: dict) -> set[str]:
    return {a["labels"]["workload"] for a in doc["alerts"] if a["rule"] == "WorkloadCanNeverStart"}


def test_a_pod_above_every_node_is_never_a_pod_waiting_for_busy_nodes_is_not(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-n1", gpus=8)
    s.node("gpu-n2", gpus=8)
    ns = s.namespace("e2e-never", team="nlp")
    # Both nodes busy with pods of the same priority: an 8-GPU pod waits for one of them to finish.
    for i, node in enumerate(("gpu-n1", "gpu-n2")):
        s.pod(ns, pod_manifest(f"busy-{i}", gpus=8, priority_class="batch", node=node))
    s.wait_running(ns, ["busy-0", "busy-1"])
    s.pod(ns, pod_manifest("giant", gpus=16, priority_class="batch"))
    s.pod(ns, pod_manifest("waits-8", gpus=8, priority_class="batch"))
    s.wait_unschedulable(ns, "giant", "Insufficient nvidia.com/gpu")
    s.wait_unschedulable(ns, "waits-8", "Insufficient nvidia.com/gpu")

    doc = s.analyze("never-nodes")

    giant = _workload(doc, "giant")
    assert giant is not None
    assert giant["never"] == {
        "reason": "node_resources",
        "asks": "16 GPUs per pod",
        "limit": "the largest schedulable node has 8",
        "source": "nodes",
        "text": "can never start as configured: asks 16 GPUs per pod, the largest schedulable node has 8",
    }
    assert giant["why"].startswith(giant["never"]["text"])
    assert giant["start_estimate"]["start_in_seconds"] is None
    assert giant["start_estimate"]["text"].startswith("never: can never start as configured")
    waits = _workload(doc, "waits-8")
    assert waits is not None and waits["never"] is None and "never" not in waits["why"]
    assert _never_alerts(doc) == {"giant"}

    # A node big enough listed: the real scheduler places it, and nothing calls it never any more.
    s.node("gpu-big", gpus=16)
    s.wait_running(ns, ["giant"])
    doc = s.analyze("never-nodes-cleared")
    giant = _workload(doc, "giant")
    assert giant is None or giant["never"] is None
    assert _never_alerts(doc) == set()


def test_a_quota_below_one_pods_ask_is_never(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-nq1", gpus=8)
    ns = s.namespace("e2e-never-quota", team="ads")
    s.api.create(
        f"/api/v1/namespaces/{ns}/resourcequotas",
        {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
    )
    wait_for(
        "the quota's status filled in by the controller",
        lambda: s.api.get(f"/api/v1/namespaces/{ns}/resourcequotas/gpu-quota").get("status", {}).get("hard"),
    )
    template = pod_manifest("x", gpus=4, priority_class="experiment")
    del template["metadata"]["name"]
    s.api.create(
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "too-big"},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template},
        },
    )
    refusal = wait_for(
        "the Job's FailedCreate event",
        lambda: next((e for e in s.events(ns, "FailedCreate") if e["involvedObject"]["kind"] == "Job"), None),
    )
    # kube-apiserver's own words: the one pod asks 4, nothing is used, the quota allows 2.
    assert "requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=0" in refusal["message"]

    doc = s.analyze("never-quota")

    w = _workload(doc, "too-big")
    assert w is not None and w["state"] == "quota_blocked"
    assert w["never"] == {
        "reason": "quota_hard",
        "asks": "4 GPUs per pod",
        "limit": "ResourceQuota gpu-quota allows at most 2",
        "source": "ResourceQuota gpu-quota",
        "text": "can never start as configured: asks 4 GPUs per pod, ResourceQuota gpu-quota allows at most 2",
    }
    assert _never_alerts(doc) == {"too-big"}
