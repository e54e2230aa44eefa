"""Installing: `kustomize build deploy/overlays/single` applied to the real API server, as `kubectl apply -k`
would, into a namespace that enforces the `restricted` Pod Security Standard (the overlay's own Namespace).
The API server's PodSecurity admission judges the security context: the Deployment's ReplicaSet gets its pod
created, a pod from the same template is admitted while the same pod without the container's securityContext
is refused. The service's ServiceAccount, by the rendered RBAC, lists pods and cannot create them.

The objects are moved to their own namespace (and cluster-scoped names given a suffix) so the test cannot
collide with another one's `watchtower` namespace still being deleted; specs are applied as rendered. No
pod runs the image (no container runtime here): admission is what this checks, and the pods stay Pending.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from tests.deploy.render import kustomize_build, tool
from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.identity import PATHS as RBAC_PATHS
from tests.e2e.scenario import Scenario

pytestmark = pytest.mark.e2e

NS = "wt-install"
SUFFIX = "-e2e-install"
CLUSTER_SCOPED = ("Namespace", "ClusterRole", "ClusterRoleBinding")
PATHS = {
    **RBAC_PATHS,
    "Namespace": "/api/v1/namespaces",
    "ConfigMap": "/api/v1/namespaces/{ns}/configmaps",
    "PersistentVolumeClaim": "/api/v1/namespaces/{ns}/persistentvolumeclaims",
    "Service": "/api/v1/namespaces/{ns}/services",
    "Deployment": "/apis/apps/v1/namespaces/{ns}/deployments",
    "NetworkPolicy": "/apis/networking.k8s.io/v1/namespaces/{ns}/networkpolicies",
}


def _relocate(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for d in map(copy.deepcopy, docs):
        meta = d["metadata"]
        if d["kind"] == "Namespace":
            meta["name"] = NS
        elif d["kind"] in CLUSTER_SCOPED:
            meta["name"] += SUFFIX
        else:
            meta["namespace"] = NS
        for subject in d.get("subjects", []):
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = NS
        if d.get("roleRef", {}).get("kind") == "ClusterRole":
            d["roleRef"]["name"] += SUFFIX
        out.append(d)
    return out


def _path(d: dict[str, Any]) -> str:
    return PATHS[d["kind"]].format(ns=d["metadata"].get("namespace", ""))


def _allowed(api: Api, **attrs: str) -> bool:
    review = api.create(
        "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": attrs},
        },
    )
    return bool(review["status"].get("allowed"))


def _dry_run_pod(admin: Api, pod: dict[str, Any]) -> ApiError | None:
    """Create `pod` with dryRun=All (admission runs, nothing is stored); return the refusal, if any."""
    try:
        admin.request("POST", f"/api/v1/namespaces/{NS}/pods", body=pod, params={"dryRun": "All"})
    except ApiError as e:
        return e
    return None


def test_the_single_overlay_is_admitted_under_the_restricted_standard_and_its_identity_only_reads(
    scenario: Scenario,
) -> None:
    s, admin = scenario, scenario.api
    docs = _relocate(kustomize_build(tool("kustomize"), "single"))
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "Role",
            "RoleBinding",
            "ConfigMap",
            "PersistentVolumeClaim",
            "Service",
            "Deployment",
            "NetworkPolicy",
        ]
    ), kinds
    (namespace,) = [d for d in docs if d["kind"] == "Namespace"]
    assert namespace["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    # The Namespace first, as `kubectl apply -k` orders it; the Scenario deletes it afterwards.
    admin.create(_path(namespace), namespace)
    s.namespaces.append(NS)
    wait_for(
        f"ServiceAccount default in {NS}",
        lambda: admin.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default"),
    )
    made: list[dict[str, Any]] = []
    try:
        for d in docs:
            if d is not namespace:
                admin.create(_path(d), d)
                made.append(d)
        (dep,) = [d for d in docs if d["kind"] == "Deployment"]
        selector = ",".join(f"{k}={v}" for k, v in dep["spec"]["selector"]["matchLabels"].items())

        # The controller-manager's ReplicaSet creates the pod: admission let it in.
        pods = wait_for(
            "the Deployment's pod",
            lambda: admin.items(f"/api/v1/namespaces/{NS}/pods", labelSelector=selector) or None,
        )
        assert len(pods) == 1
        refusals = [
            e.get("message", "")
            for e in admin.items(f"/api/v1/namespaces/{NS}/events")
            if e.get("reason") == "FailedCreate"
        ]
        assert refusals == []

        # The same verdict asked directly, with a control the standard must refuse: the namespace enforces.
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "template-probe", "labels": {"probe": "install"}},
            "spec": copy.deepcopy(dep["spec"]["template"]["spec"]),
        }
        assert _dry_run_pod(admin, pod) is None
        loose = copy.deepcopy(pod)
        for c in loose["spec"]["containers"]:
            del c["securityContext"]
        refused = _dry_run_pod(admin, loose)
        assert refused is not None and refused.status == 403, refused
        message = json.loads(refused.body)["message"]
        assert 'violates PodSecurity "restricted:latest"' in message
        assert "allowPrivilegeEscalation != false" in message
        assert "unrestricted capabilities" in message

        # The service's identity: reads the cluster, writes no pod, only its own Lease in its namespace.
        token = admin.create(
            f"/api/v1/namespaces/{NS}/serviceaccounts/watchtower/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 600},
            },
        )["status"]["token"]
        sa = admin.with_token(token)
        try:
            for verb in ("get", "list", "watch"):
                assert _allowed(sa, verb=verb, resource="pods"), verb
            assert not _allowed(sa, verb="create", resource="pods", namespace=NS)
            assert not _allowed(sa, verb="create", resource="pods", namespace="default")
            assert not _allowed(sa, verb="delete", resource="pods", namespace=NS)
            lease = {"group": "coordination.k8s.io", "resource": "leases"}
            assert _allowed(sa, verb="create", namespace=NS, **lease)
            for verb in ("get", "update"):
                assert _allowed(sa, verb=verb, namespace=NS, name="watchtower", **lease), verb
            assert not _allowed(sa, verb="update", namespace="default", name="watchtower", **lease)
            assert not _allowed(sa, verb="delete", namespace=NS, name="watchtower", **lease)
            # And as the server acts on it, not only as it answers reviews.
            assert pods[0]["metadata"]["name"] in {
                p["metadata"]["name"] for p in sa.items(f"/api/v1/namespaces/{NS}/pods")
            }
            with pytest.raises(ApiError) as e:
                sa.create(f"/api/v1/namespaces/{NS}/pods", {**pod, "metadata": {"name": "intruder"}})
            assert e.value.status == 403
        finally:
            sa.close()
    finally:
        for d in made:
            if d["kind"] in CLUSTER_SCOPED:
                admin.delete(f"{_path(d)}/{d['metadata']['name']}")
