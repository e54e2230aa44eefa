"""The deploy/ manifests: valid Kubernetes objects (offline schemas), a config the service accepts, read-only RBAC."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from watchtower.config import settings_from_mapping

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S_VERSION = "1.36.0"


def _docs() -> list[tuple[str, dict]]:
    out = []
    for f in sorted(DEPLOY.glob("*.yaml")):
        for doc in yaml.safe_load_all(f.read_text()):
            if doc:
                out.append((f"{f.name}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


DOCS = _docs()


@pytest.mark.parametrize(("name", "doc"), DOCS, ids=[n for n, _ in DOCS])
def test_every_manifest_validates_against_the_kubernetes_schema(name: str, doc: dict) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_shipped_configmap_is_a_configuration_the_service_accepts(tmp_path: Path) -> None:
    cms = [d for _, d in DOCS if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "watchtower-config"]
    assert len(cms) == 1
    data = yaml.safe_load(cms[0]["data"]["config.yaml"])
    # The Secret is mounted in the cluster; here a file of the same role stands in for it.
    secret = tmp_path / "api-token"
    secret.write_text("s3cret\n")
    assert data["server"]["api_token_file"].startswith("/var/run/secrets/")
    data["server"]["api_token_file"] = str(secret)
    settings = settings_from_mapping(data, env={})
    assert settings.cluster.source == "kube"
    assert settings.server.api_token is not None
    assert settings.server.api_token.get_secret_value() == "s3cret"


def test_the_deployment_runs_as_non_root_with_a_read_only_root_filesystem() -> None:
    (dep,) = [d for _, d in DOCS if d["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    for c in pod["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False


def test_cluster_wide_permissions_are_read_only() -> None:
    roles = [d for _, d in DOCS if d["kind"] == "ClusterRole"]
    assert roles, "deploy/ must grant the service its read access with a ClusterRole"
    for role in roles:
        for rule in role["rules"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule
