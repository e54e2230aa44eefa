"""Scenario 7: deploy/base/rbac.yaml on the real API server. Watchtower's ServiceAccount token is enough for the
service's feed, and every write outside its own leader Lease is refused."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.feed import Feed
from tests.e2e.identity import PATHS, RBAC
from tests.e2e.scenario import Scenario, pod_manifest
from watchtower.adapters.kube import RESOURCES, Resource
from watchtower.domain.kinds import PADDLE_JOB

pytestmark = pytest.mark.e2e

READS = [
    ("", "pods"),
    ("", "events"),
    ("", "nodes"),
    ("", "namespaces"),
    ("", "resourcequotas"),
    ("events.k8s.io", "events"),
    ("scheduling.k8s.io", "priorityclasses"),
    ("batch.paddlepaddle.org", "paddlejobs"),
]
WRITES = ("create", "update", "patch", "delete", "deletecollection")


def _apply(api: Api, docs: list[dict[str, Any]]) -> None:
    for d in docs:
        path = PATHS[d["kind"]].format(ns=d["metadata"].get("namespace", ""))
        api.create(path, d)


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


def _refused(call: Any) -> int:
    try:
        call()
    except ApiError as e:
        return e.status
    return 200


def test_watchtower_service_account_reads_everything_it_watches_and_writes_only_its_lease(
    scenario: Scenario, control_plane: ControlPlane
) -> None:
    s, admin = scenario, scenario.api
    docs = [d for d in yaml.safe_load_all(RBAC.read_text()) if d]
    cluster_scoped = [d for d in docs if d["kind"] in ("ClusterRole", "ClusterRoleBinding")]
    s.namespace("watchtower")
    work = s.namespace("e2e-rbac", team="infra")
    s.node("gpu-r1", gpus=4)
    s.pod(work, pod_manifest("probe", gpus=1, priority_class="batch"))
    _apply(admin, docs)
    try:
        token = admin.create(
            "/api/v1/namespaces/watchtower/serviceaccounts/watchtower/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": 3600},
            },
        )["status"]["token"]
        sa = admin.with_token(token)

        # What the role grants and nothing more, as the authorizer answers.
        for group, resource in READS:
            for verb in ("get", "list", "watch"):
                assert _allowed(sa, verb=verb, group=group, resource=resource), (verb, group, resource)
            for verb in WRITES:
                assert not _allowed(sa, verb=verb, group=group, resource=resource), (verb, group, resource)
        for group, resource, sub in [
            ("", "pods", "status"),
            ("", "pods", "eviction"),
            ("", "nodes", "status"),
        ]:
            assert not _allowed(sa, verb="create", group=group, resource=resource, subresource=sub)
            assert not _allowed(sa, verb="patch", group=group, resource=resource, subresource=sub)
        for resource in ("secrets", "configmaps"):
            assert not _allowed(sa, verb="get", group="", resource=resource, namespace="watchtower")
        lease = {"group": "coordination.k8s.io", "resource": "leases"}
        assert _allowed(sa, verb="create", namespace="watchtower", **lease)
        assert _allowed(sa, verb="update", namespace="watchtower", name="watchtower", **lease)
        assert not _allowed(sa, verb="update", namespace="watchtower", name="someone-else", **lease)
        assert not _allowed(sa, verb="create", namespace="kube-system", **lease)

        # Actual writes, refused by the real server.
        ns_path = f"/api/v1/namespaces/{work}"
        attempts = {
            "create pod": lambda: sa.create(f"{ns_path}/pods", pod_manifest("intruder", gpus=1)),
            "delete pod": lambda: sa.delete(f"{ns_path}/pods/probe", missing_ok=False),
            "evict pod": lambda: sa.create(
                f"{ns_path}/pods/probe/eviction",
                {
                    "apiVersion": "policy/v1",
                    "kind": "Eviction",
                    "metadata": {"name": "probe", "namespace": work},
                },
            ),
            "patch pod status": lambda: sa.patch_status(
                f"{ns_path}/pods/probe", {"status": {"phase": "Failed"}}
            ),
            "label namespace": lambda: sa.merge_patch(ns_path, {"metadata": {"labels": {"x": "y"}}}),
            "cordon node": lambda: sa.merge_patch("/api/v1/nodes/gpu-r1", {"spec": {"unschedulable": True}}),
            "create event": lambda: sa.create(
                f"{ns_path}/events",
                {
                    "metadata": {"name": "forged"},
                    "involvedObject": {"kind": "Pod", "name": "probe", "namespace": work},
                },
            ),
            "delete priority class": lambda: sa.delete(
                "/apis/scheduling.k8s.io/v1/priorityclasses/batch", missing_ok=False
            ),
            "read secrets": lambda: sa.get(f"{ns_path}/secrets"),
            "lease elsewhere": lambda: sa.create(
                "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases",
                {"metadata": {"name": "watchtower"}, "spec": {"holderIdentity": "x"}},
            ),
        }
        assert {what: _refused(call) for what, call in attempts.items()} == dict.fromkeys(attempts, 403)

        # Its own Lease: the one write it needs.
        leases = "/apis/coordination.k8s.io/v1/namespaces/watchtower/leases"
        held = sa.create(
            leases, {"metadata": {"name": "watchtower"}, "spec": {"holderIdentity": "replica-0"}}
        )
        held["spec"]["holderIdentity"] = "replica-1"
        assert sa.request("PUT", f"{leases}/watchtower", body=held)["spec"]["holderIdentity"] == "replica-1"

        # The service's own feed with nothing but this token.
        kubeconfig = s.workdir / "watchtower.kubeconfig"
        kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {
                            "name": "e2e",
                            "cluster": {
                                "server": control_plane.url,
                                "certificate-authority": str(control_plane.pki.ca_cert),
                            },
                        }
                    ],
                    "users": [{"name": "watchtower", "user": {"token": token}}],
                    "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "watchtower"}}],
                    "current-context": "e2e",
                }
            )
        )
        # PaddleJobs are not watched until something reads them; the role must still let the service list them.
        feed = Feed(kubeconfig, resources=(*RESOURCES, Resource.of(PADDLE_JOB)))
        feed.start()
        try:
            kinds = [r.kind for r in feed.source.resources]
            wait_for(
                "every kind listed with the ServiceAccount token",
                # An optional kind whose CRD this cluster lacks (JobSet) is known absent by a 404, not synced.
                lambda: all(
                    feed.source.kind_health(k).synced or not feed.source.kind_health(k).present for k in kinds
                ),
            )
            # Served by this control plane (the gang API, the CRDs the session installs): read under the role.
            for k in ("PaddleJob", "Workload", "PodGroup", "VolcanoPodGroup", "VolcanoQueue"):
                assert feed.source.kind_health(k).present and feed.source.kind_health(k).synced, k
            for k in kinds:
                assert feed.source.kind_health(k).last_error == "", (k, feed.source.kind_health(k).last_error)
            wait_for(
                "the probe pod and the node in the feed's picture",
                lambda: feed.read(
                    lambda st: "gpu-r1" in st.nodes and any(p.name == "probe" for p in st.pods.values())
                ),
            )
        finally:
            feed.stop()
    finally:
        for d in cluster_scoped:
            admin.delete(f"{PATHS[d['kind']]}/{d['metadata']['name']}")
