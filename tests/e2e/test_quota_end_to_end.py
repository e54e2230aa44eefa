"""Scenario 4: a Job refused by a ResourceQuota never has a pod; Watchtower finds it from the real event."""

from __future__ import annotations

import pytest

from tests.e2e.api import wait_for
from tests.e2e.scenario import Scenario, pod_manifest

pytestmark = pytest.mark.e2e


def test_job_refused_by_resource_quota_is_a_quota_blocked_workload(scenario: Scenario) -> None:
    s = scenario
    s.node("gpu-q1", gpus=8)
    ns = s.namespace("e2e-quota", team="ads")
    s.api.create(
        f"/api/v1/namespaces/{ns}/resourcequotas",
        {"metadata": {"name": "gpu-quota"}, "spec": {"hard": {"requests.nvidia.com/gpu": "2"}}},
    )
    # Admission enforces a quota only once the controller has written its status.
    quota = wait_for(
        "the quota's status filled in by the controller",
        lambda: (
            (q := s.api.get(f"/api/v1/namespaces/{ns}/resourcequotas/gpu-quota"))
            .get("status", {})
            .get("hard")
            and q
        ),
    )
    template = pod_manifest("x", gpus=4, priority_class="experiment")
    del template["metadata"]["name"]
    s.api.create(
        f"/apis/batch/v1/namespaces/{ns}/jobs",
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "sweep"},
            "spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0, "template": template},
        },
    )
    # A serving Deployment over the same quota: its ReplicaSet's pods are refused.
    serving = pod_manifest("x", gpus=4, priority_class="online-serving", labels={"app": "serve"})
    del serving["metadata"]["name"]
    s.api.create(
        f"/apis/apps/v1/namespaces/{ns}/deployments",
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": "serve"},
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": {"app": "serve"}},
                "template": {**serving, "spec": {**serving["spec"], "restartPolicy": "Always"}},
            },
        },
    )
    refusals = wait_for(
        "the Job's and the ReplicaSet's FailedCreate events",
        lambda: (
            (e := s.events(ns, "FailedCreate"))
            and {x["involvedObject"]["kind"] for x in e} >= {"Job", "ReplicaSet"}
            and e
        ),
    )
    event = next(e for e in refusals if e["involvedObject"]["kind"] == "Job")
    assert "exceeded quota: gpu-quota" in event["message"]
    assert s.pods(ns) == []

    doc = s.analyze("quota")

    w = next(w for w in doc["workloads"] if w["name"] == "sweep")
    assert w["kind"] == "Job"
    assert w["state"] == "quota_blocked"
    assert w["team"] == "ads"
    assert w["quota"]["name"] == "gpu-quota"
    assert w["quota"]["requested"] == {"requests.nvidia.com/gpu": "4"}
    assert w["quota"]["used"] == {"requests.nvidia.com/gpu": "0"}
    assert w["quota"]["limited"] == {"requests.nvidia.com/gpu": "2"}
    assert w["gpus_requested"] == 4
    # No pod exists: the tier is the Job template's class (experiment: medium), not priority 0's lowest.
    assert (w["tier"], w["priority_class"]) == ("medium", "experiment")
    # The ReplicaSet's refusal is the Deployment's, in the tier of its template's class.
    d = next(w for w in doc["workloads"] if w["name"] == "serve")
    assert (d["kind"], d["state"], d["tier"], d["priority_class"]) == (
        "Deployment",
        "quota_blocked",
        "high",
        "online-serving",
    )
    assert d["gpus_requested"] == 4
    assert not [w for w in doc["workloads"] if w["kind"] == "ReplicaSet"]
    assert doc["quota"] == [
        {"namespace": ns, "name": "gpu-quota", "team": "ads", "gpus_hard": 2, "gpus_used": 0}
    ]
    s.save_fixture("failedcreate-quota-event", event)
    s.save_fixture("job-refused-by-quota", s.api.get(f"/apis/batch/v1/namespaces/{ns}/jobs/sweep"))
    (rs,) = s.api.items(f"/apis/apps/v1/namespaces/{ns}/replicasets")
    s.save_fixture("replicaset-of-deployment", {"apiVersion": "apps/v1", "kind": "ReplicaSet", **rs})
    s.save_fixture(
        "replicaset-failedcreate-quota-event",
        next(e for e in refusals if e["involvedObject"]["kind"] == "ReplicaSet"),
    )
    s.save_fixture("resourcequota-gpu", s.api.get(f"/api/v1/namespaces/{ns}/resourcequotas/gpu-quota"))
    assert quota["status"]["hard"] == {"requests.nvidia.com/gpu": "2"}
