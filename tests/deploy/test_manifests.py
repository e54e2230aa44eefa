"""The deploy/ Kustomize files as written, without kustomize: every whole object validates (offline schemas),
the overlays' configurations are ones the service accepts, the RBAC is read-only cluster-wide. The rendered
forms (kustomize build, helm template) are checked in test_install_forms.py."""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from watchtower.config import settings_from_mapping

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
K8S_VERSION = "1.36.0"
# Patches are partial objects and kustomization.yaml/config.yaml are no Kubernetes objects.
NOT_OBJECTS = {"kustomization.yaml", "config.yaml", "deployment-patch.yaml"}


def _docs() -> list[tuple[str, dict]]:
    out = []
    for d in [DEPLOY / "base", DEPLOY / "overlays" / "single", DEPLOY / "overlays" / "ha"]:
        for f in sorted(d.glob("*.yaml")):
            if f.name in NOT_OBJECTS:
                continue
            for doc in yaml.safe_load_all(f.read_text()):
                if doc:
                    rel = f.relative_to(DEPLOY)
                    out.append((f"{rel}:{doc['kind']}/{doc['metadata']['name']}", doc))
    return out


DOCS = _docs()


def _config(overlay: str) -> dict:
    return yaml.safe_load((DEPLOY / "overlays" / overlay / "config.yaml").read_text())


@pytest.mark.parametrize(("name", "doc"), DOCS, ids=[n for n, _ in DOCS])
def test_every_manifest_validates_against_the_kubernetes_schema(name: str, doc: dict) -> None:
    kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_the_old_single_file_layout_is_gone_so_no_one_applies_it_out_of_order() -> None:
    # `kubectl apply -f deploy/` applied rbac.yaml before the namespace existed; docs/install.md now says
    # `kubectl apply -k deploy/overlays/single`, and a plain `-f deploy/` finds no objects to half-apply.
    assert not list(DEPLOY.glob("*.yaml"))


def test_the_single_configuration_starts_without_the_optional_secret() -> None:
    # The Secret `watchtower` is optional (its env and volume say so): without it the service must still
    # accept its configuration, with changes through the API disabled rather than a crash loop.
    settings = settings_from_mapping(_config("single"), env={})
    assert settings.cluster.source == "kube"
    assert settings.server.api_token is None
    assert settings.store.path.startswith("/var/lib/watchtower/")


def test_the_api_token_reaches_the_service_from_the_environment_the_secret_fills() -> None:
    settings = settings_from_mapping(_config("single"), env={"WATCHTOWER_SERVER__API_TOKEN": "s3cret"})
    assert settings.server.api_token is not None
    assert settings.server.api_token.get_secret_value() == "s3cret"


@pytest.mark.parametrize("overlay", ["single", "ha"])
def test_the_external_url_is_a_marked_placeholder_to_review(overlay: str) -> None:
    text = (DEPLOY / "overlays" / overlay / "config.yaml").read_text()
    assert _config(overlay)["server"]["external_url"] == "https://watchtower.example.com"
    before = text.split("external_url:")[0].splitlines()[-4:]
    assert any("REVIEW" in line for line in before), before


def test_the_ha_configuration_is_one_the_service_accepts() -> None:
    from watchtower.config.model import Settings, StoreConfig

    missing = [
        name
        for name, present in [
            ("store.url", "url" in StoreConfig.model_fields),
            ("leader_election", "leader_election" in Settings.model_fields),
        ]
        if not present
    ]
    if missing:
        pytest.skip(
            f"this checkout's configuration has no {', '.join(missing)} yet (PostgreSQL store, Lease)"
        )
    env = {"WATCHTOWER_STORE__URL": "postgresql://watchtower:pw@db:5432/watchtower"}
    settings = settings_from_mapping(_config("ha"), env=env)
    assert settings.leader_election.enabled is True  # type: ignore[attr-defined]
    assert settings.leader_election.lease_name == "watchtower"  # type: ignore[attr-defined]


def test_the_deployment_runs_as_non_root_with_a_read_only_root_filesystem() -> None:
    (dep,) = [d for _, d in DOCS if d["kind"] == "Deployment"]
    pod = dep["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    for c in pod["containers"]:
        assert c["securityContext"]["readOnlyRootFilesystem"] is True
        assert c["securityContext"]["allowPrivilegeEscalation"] is False
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}


def test_cluster_wide_permissions_are_read_only() -> None:
    roles = [d for _, d in DOCS if d["kind"] == "ClusterRole"]
    assert roles, "deploy/base must grant the service its read access with a ClusterRole"
    for role in roles:
        for rule in role["rules"]:
            assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule


def test_the_lease_the_role_lets_it_write_is_the_one_the_ha_configuration_names() -> None:
    (role,) = [d for _, d in DOCS if d["kind"] == "Role"]
    named = {n for r in role["rules"] for n in r.get("resourceNames", [])}
    assert named == {_config("ha")["leader_election"]["lease_name"]}
