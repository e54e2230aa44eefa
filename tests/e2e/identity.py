"""Watchtower's own identity on the test cluster, as deploy/base/rbac.yaml defines it: the ServiceAccount, its
read-only ClusterRole and its leader-Lease Role, a TokenRequest token, and a kubeconfig carrying only that.

The manifest can be placed in a namespace of the caller's choosing (and its cluster-scoped objects given a
suffix), so that a test does not collide with another one's `watchtower` namespace still being deleted; the
rules themselves are applied exactly as written.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.e2e.api import Api

RBAC = Path(__file__).resolve().parents[2] / "deploy" / "base" / "rbac.yaml"
RBAC_API = "/apis/rbac.authorization.k8s.io/v1"
PATHS = {
    "ServiceAccount": "/api/v1/namespaces/{ns}/serviceaccounts",
    "ClusterRole": f"{RBAC_API}/clusterroles",
    "ClusterRoleBinding": f"{RBAC_API}/clusterrolebindings",
    "Role": f"{RBAC_API}/namespaces/{{ns}}/roles",
    "RoleBinding": f"{RBAC_API}/namespaces/{{ns}}/rolebindings",
}
CLUSTER_SCOPED = ("ClusterRole", "ClusterRoleBinding")


def rbac_documents(*, namespace: str = "watchtower", suffix: str = "") -> list[dict[str, Any]]:
    """Return deploy/base/rbac.yaml's objects moved to `namespace`, cluster-scoped names ending in `suffix`."""
    docs = [copy.deepcopy(d) for d in yaml.safe_load_all(RBAC.read_text()) if d]
    for d in docs:
        meta = d["metadata"]
        if d["kind"] in CLUSTER_SCOPED:
            meta["name"] += suffix
        else:
            meta["namespace"] = namespace
        for subject in d.get("subjects", []):
            if subject.get("kind") == "ServiceAccount":
                subject["namespace"] = namespace
        ref = d.get("roleRef")
        if ref and ref["kind"] == "ClusterRole":
            ref["name"] += suffix
    return docs


@dataclass
class Identity:
    """The applied manifest; `remove` deletes its cluster-scoped objects (the namespace takes the rest)."""

    admin: Api
    namespace: str
    docs: list[dict[str, Any]] = field(default_factory=list)

    def token(self, *, name: str = "watchtower", seconds: int = 3600) -> str:
        return str(
            self.admin.create(
                f"/api/v1/namespaces/{self.namespace}/serviceaccounts/{name}/token",
                {
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"expirationSeconds": seconds},
                },
            )["status"]["token"]
        )

    def remove(self) -> None:
        for d in self.docs:
            if d["kind"] in CLUSTER_SCOPED:
                self.admin.delete(f"{PATHS[d['kind']]}/{d['metadata']['name']}")


def apply_rbac(admin: Api, *, namespace: str, suffix: str = "") -> Identity:
    """Create deploy/base/rbac.yaml's objects in `namespace` (which must exist) with the admin identity."""
    identity = Identity(admin, namespace)
    for d in rbac_documents(namespace=namespace, suffix=suffix):
        admin.create(PATHS[d["kind"]].format(ns=d["metadata"].get("namespace", "")), d)
        identity.docs.append(d)
    return identity


def token_kubeconfig(path: Path, *, server: str, ca: Path, token: str) -> Path:
    """Write a kubeconfig naming one cluster (`server`, trusted through `ca`) and one bearer token."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "e2e", "cluster": {"server": server, "certificate-authority": str(ca)}}
                ],
                "users": [{"name": "watchtower", "user": {"token": token}}],
                "contexts": [{"name": "e2e", "context": {"cluster": "e2e", "user": "watchtower"}}],
                "current-context": "e2e",
            }
        )
    )
    return path
