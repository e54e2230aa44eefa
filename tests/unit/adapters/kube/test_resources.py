"""What the Kubernetes adapter lists and watches: the watched kinds, at their API paths, all granted by RBAC."""

from __future__ import annotations

import yaml

from tests.fixtures import ROOT
from watchtower.adapters.kube import RESOURCES
from watchtower.domain.forms.registry import WATCHED
from watchtower.domain.kinds import PADDLE_JOB

RBAC = ROOT / "deploy" / "base" / "rbac.yaml"


def test_the_adapter_watches_each_kind_at_its_cluster_wide_path() -> None:
    assert {r.kind: r.path for r in RESOURCES} == {
        "Namespace": "/api/v1/namespaces",
        "PriorityClass": "/apis/scheduling.k8s.io/v1/priorityclasses",
        "Node": "/api/v1/nodes",
        "ResourceQuota": "/api/v1/resourcequotas",
        "Job": "/apis/batch/v1/jobs",
        "ReplicaSet": "/apis/apps/v1/replicasets",
        "PaddleJob": "/apis/batch.paddlepaddle.org/v1/paddlejobs",
        "Workload": "/apis/scheduling.k8s.io/v1beta1/workloads",
        "PodGroup": "/apis/scheduling.k8s.io/v1beta1/podgroups",
        "VolcanoPodGroup": "/apis/scheduling.volcano.sh/v1beta1/podgroups",
        "VolcanoQueue": "/apis/scheduling.volcano.sh/v1beta1/queues",
        "JobSet": "/apis/jobset.x-k8s.io/v1alpha2/jobsets",
        "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
        "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
        "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        "ResourceClaim": "/apis/resource.k8s.io/v1/resourceclaims",
        "WorkloadPriorityClass": "/apis/kueue.x-k8s.io/v1beta2/workloadpriorityclasses",
        "ClusterQueue": "/apis/kueue.x-k8s.io/v1beta2/clusterqueues",
        "LocalQueue": "/apis/kueue.x-k8s.io/v1beta2/localqueues",
        "KueueWorkload": "/apis/kueue.x-k8s.io/v1beta2/workloads",
        "Pod": "/api/v1/pods",
        "Event": "/api/v1/events",
    }
    assert PADDLE_JOB.path == "/apis/batch.paddlepaddle.org/v1/paddlejobs"
    # 1.37 serves Workload and PodGroup at v1beta1, 1.36 at v1alpha2, 1.35 Workload at v1alpha1 only: the
    # source tries each older version in turn when the newer one is not found.
    workload = next(r for r in RESOURCES if r.kind == "Workload")
    assert workload.paths == (
        "/apis/scheduling.k8s.io/v1beta1/workloads",
        "/apis/scheduling.k8s.io/v1alpha2/workloads",
        "/apis/scheduling.k8s.io/v1alpha1/workloads",
    )
    podgroup = next(r for r in RESOURCES if r.kind == "PodGroup")
    assert podgroup.paths == (
        "/apis/scheduling.k8s.io/v1beta1/podgroups",
        "/apis/scheduling.k8s.io/v1alpha2/podgroups",
    )
    assert all(
        r.optional for r in RESOURCES if r.kind in {"Workload", "PodGroup", "VolcanoPodGroup", "VolcanoQueue"}
    )
    # Kueue before v0.15 serves v1beta1 only.
    kueue = next(r for r in RESOURCES if r.kind == "KueueWorkload")
    assert kueue.optional
    assert kueue.paths == ("/apis/kueue.x-k8s.io/v1beta2/workloads", "/apis/kueue.x-k8s.io/v1beta1/workloads")


def test_the_shipped_cluster_role_lets_the_service_list_and_watch_every_watched_kind() -> None:
    role = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d and d["kind"] == "ClusterRole")
    granted = {
        (group, resource)
        for rule in role["rules"]
        if {"list", "watch"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert {(k.group, k.plural) for k in WATCHED} <= granted
