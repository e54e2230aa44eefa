"""Scenario 4: a Job refused by a ResourceQuota never has a pod; Watchtower finds it from the real event."""

from __future__ import annotations

import pytest

from .api import wait_for
from .scenario import Scenario, pod_manifest

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
    event = wait_for("the Job controller's FailedCreate event", lambda: s.events(ns, "FailedCreate"))[0]
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
    assert doc["quota"] == [
        {"namespace": ns, "name": "gpu-quota", "team": "ads", "gpus_hard": 2, "gpus_used": 0}
    ]
    s.save_fixture("failedcreate-quota-event", event)
    s.save_fixture("resourcequota-gpu", s.api.get(f"/api/v1/namespaces/{ns}/resourcequotas/gpu-quota"))
    assert quota["status"]["hard"] == {"requests.nvidia.com/gpu": "2"}
