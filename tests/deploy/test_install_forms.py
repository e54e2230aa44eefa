"""The two ways to install, rendered by the real tools: `kustomize build deploy/overlays/{single,ha}` and
`helm template deploy/helm/watchtower`. Both validate strictly, `helm lint` is clean, and the chart renders
the same objects as the overlay it stands for, but for the Namespace (a Helm release does not own its
namespace) and what Helm itself adds (the labels `helm.sh/chart` and `app.kubernetes.io/managed-by`, and
`helm.sh/resource-policy: keep` on the state volume's claim)."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.deploy.render import (
    CHART,
    DEPLOY,
    EXTERNAL_URL,
    HELM_VALUES,
    OVERLAYS,
    helm_template,
    key,
    kustomize_build,
    one,
    run,
    tool,
)
from watchtower.config import settings_from_mapping
from watchtower.config.model import Settings, StoreConfig

K8S_VERSION = "1.36.0"
HELM_LABELS = ("helm.sh/chart", "app.kubernetes.io/managed-by")
HELM_ANNOTATIONS = ("helm.sh/resource-policy",)


@pytest.fixture(scope="module")
def kustomize() -> str:
    return tool("kustomize")


@pytest.fixture(scope="module")
def helm() -> str:
    return tool("helm")


@pytest.fixture(scope="module")
def rendered(kustomize: str, helm: str) -> dict[tuple[str, str], list[dict[str, Any]]]:
    out = {}
    for overlay in OVERLAYS:
        out[("kustomize", overlay)] = kustomize_build(kustomize, overlay)
        out[("helm", overlay)] = helm_template(helm, HELM_VALUES[overlay])
    return out


FORMS = [(t, o) for t in ("kustomize", "helm") for o in OVERLAYS]
IDS = [f"{t}-{o}" for t, o in FORMS]


@pytest.mark.parametrize("form", FORMS, ids=IDS)
def test_every_rendered_object_validates_strictly(rendered: dict, form: tuple[str, str]) -> None:
    docs = rendered[form]
    assert docs
    for doc in docs:
        try:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)
        except kubernetes_validate.ValidationError as e:
            pytest.fail(f"{key(doc)}: {e.message} at {list(e.path)}")


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_helm_lint_is_clean(helm: str, overlay: str) -> None:
    done = run([helm, "lint", "--strict", str(CHART), *HELM_VALUES[overlay]])
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout, done.stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


def test_helm_refuses_to_render_without_the_external_url(helm: str) -> None:
    done = run([helm, "template", "watchtower", str(CHART)])
    assert done.returncode != 0
    assert "externalURL is required" in done.stderr


def _content(docs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Each object by kind/namespace/name, with what only Helm adds removed and the configuration file
    parsed (the chart writes it with toYaml, the overlay as a file with comments)."""
    out = {}
    for d in docs:
        d = copy.deepcopy(d)
        meta = d["metadata"]
        for name in HELM_LABELS:
            meta.get("labels", {}).pop(name, None)
        for name in HELM_ANNOTATIONS:
            meta.get("annotations", {}).pop(name, None)
        if meta.get("annotations") == {}:
            del meta["annotations"]
        if d["kind"] == "ConfigMap" and "config.yaml" in d.get("data", {}):
            d["data"]["config.yaml"] = yaml.safe_load(d["data"]["config.yaml"])
        out[key(d)] = d
    return out


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_chart_renders_the_same_objects_as_the_overlay(rendered: dict, overlay: str) -> None:
    k = _content(rendered[("kustomize", overlay)])
    h = _content(rendered[("helm", overlay)])
    assert k.pop("Namespace//watchtower")["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == (
        "restricted"
    )
    assert sorted(k) == sorted(h)
    for name in k:
        assert h[name] == k[name], name


def _env(container: dict[str, Any], *, with_secrets: bool) -> dict[str, str]:
    """The environment the kubelet gives the container: a fake value for each Secret key it refers to
    (an optional one only `with_secrets`), a field reference's value made up."""
    env = {}
    for e in container.get("env", []):
        src = e.get("valueFrom", {})
        if "secretKeyRef" in src:
            ref = src["secretKeyRef"]
            if ref.get("optional") and not with_secrets:
                continue
            env[e["name"]] = (
                "postgresql://watchtower:pw@db:5432/watchtower"
                if e["name"].endswith("STORE__URL")
                else "s3cret"
            )
        elif "fieldRef" in src:
            env[e["name"]] = "watchtower-0"
        else:
            env[e["name"]] = e["value"]
    return env


def _needs_ha_config(overlay: str) -> None:
    missing = [
        name
        for name, present in [
            ("store.url", "url" in StoreConfig.model_fields),
            ("leader_election", "leader_election" in Settings.model_fields),
        ]
        if not present
    ]
    if overlay == "ha" and missing:
        pytest.skip(
            f"this checkout's configuration has no {', '.join(missing)} yet (PostgreSQL store, Lease)"
        )


@pytest.mark.parametrize("form", FORMS, ids=IDS)
@pytest.mark.parametrize("with_secrets", [True, False], ids=["with-secret", "without-secret"])
def test_the_rendered_configuration_is_one_the_service_accepts(
    rendered: dict, form: tuple[str, str], with_secrets: bool
) -> None:
    _needs_ha_config(form[1])
    docs = rendered[form]
    dep = one(docs, "Deployment")
    pod = dep["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    (cm_volume,) = [v for v in pod["volumes"] if "configMap" in v]
    cms = {d["metadata"]["name"]: d for d in docs if d["kind"] == "ConfigMap"}
    mount = next(m for m in container["volumeMounts"] if m["name"] == cm_volume["name"])
    config_path = container["args"][container["args"].index("--config") + 1]
    assert config_path.startswith(mount["mountPath"] + "/")
    cm = cms[cm_volume["configMap"]["name"]]
    data = yaml.safe_load(cm["data"][config_path.rsplit("/", 1)[1]])
    settings = settings_from_mapping(data, env=_env(container, with_secrets=with_secrets))
    assert settings.cluster.source == "kube"
    assert settings.server.external_url == EXTERNAL_URL
    assert (settings.server.api_token is not None) is with_secrets
    # The HTTP server listens where the Service and the probes look.
    (port,) = container["ports"]
    assert (settings.server.host, settings.server.port) == ("0.0.0.0", port["containerPort"])
    if form[1] == "single":
        # SQLite on the claimed volume, which is writable (the root filesystem is not).
        state = next(
            m["mountPath"]
            for m in container["volumeMounts"]
            if any(v["name"] == m["name"] and "persistentVolumeClaim" in v for v in pod["volumes"])
        )
        assert settings.store.path.startswith(state + "/")
        assert dep["spec"]["strategy"]["type"] == "Recreate"
    else:
        assert settings.store.url.startswith("postgresql://")  # type: ignore[attr-defined]
        assert settings.leader_election.enabled  # type: ignore[attr-defined]
        role = one(docs, "Role")
        lease = settings.leader_election.lease_name  # type: ignore[attr-defined]
        assert [lease] in [r.get("resourceNames") for r in role["rules"]]


@pytest.mark.parametrize("form", FORMS, ids=IDS)
def test_the_service_the_network_policy_and_the_budget_select_the_pods(
    rendered: dict, form: tuple[str, str]
) -> None:
    docs = rendered[form]
    dep = one(docs, "Deployment")
    labels = dep["spec"]["template"]["metadata"]["labels"]
    assert dep["spec"]["selector"]["matchLabels"].items() <= labels.items()
    svc = one(docs, "Service")
    assert svc["spec"]["selector"].items() <= labels.items()
    np = one(docs, "NetworkPolicy")
    assert np["spec"]["podSelector"]["matchLabels"].items() <= labels.items()
    (rule,) = np["spec"]["ingress"]
    assert {"podSelector": {}} in rule["from"]  # anyone in the namespace reaches the page and API
    assert rule["ports"] == [{"port": "http", "protocol": "TCP"}]
    egress = {p["port"] for r in np["spec"]["egress"] for p in r["ports"]}
    assert {53, 443, 6443, 25, 465, 587, 9093, 9090} <= egress
    pdbs = [d for d in docs if d["kind"] == "PodDisruptionBudget"]
    if form[1] == "ha":
        assert dep["spec"]["replicas"] == 2
        assert 5432 in egress
        (pdb,) = pdbs
        assert pdb["spec"]["selector"]["matchLabels"].items() <= labels.items()
        assert pdb["spec"]["minAvailable"] < dep["spec"]["replicas"]
    else:
        assert dep["spec"]["replicas"] == 1
        assert pdbs == []
        assert 5432 not in egress


@pytest.mark.parametrize("form", FORMS, ids=IDS)
def test_the_image_is_the_projects_own_without_a_registry(rendered: dict, form: tuple[str, str]) -> None:
    (container,) = one(rendered[form], "Deployment")["spec"]["template"]["spec"]["containers"]
    assert container["image"] == "watchtower:0.1.0"


def test_ones_own_overlay_replaces_the_configuration_and_the_image_as_the_install_guide_says(
    kustomize: str, helm: str, tmp_path: Path
) -> None:
    mine = tmp_path / "my-watchtower"
    mine.mkdir()
    config = yaml.safe_load((DEPLOY / "overlays" / "single" / "config.yaml").read_text())
    config["server"]["external_url"] = "https://watchtower.internal.example.org"
    (mine / "config.yaml").write_text(yaml.safe_dump(config))
    (mine / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "resources": [os.path.relpath(DEPLOY / "overlays" / "single", mine)],
                "configMapGenerator": [
                    {
                        "name": "watchtower-config",
                        "namespace": "watchtower",
                        "behavior": "replace",
                        "files": ["config.yaml"],
                        "options": {"disableNameSuffixHash": True},
                    }
                ],
                "images": [
                    {"name": "watchtower", "newName": "registry.internal/ml/watchtower", "newTag": "0.1.1"}
                ],
            }
        )
    )
    docs = kustomize_build(kustomize, mine)
    (cm,) = [d for d in docs if d["kind"] == "ConfigMap"]
    assert cm["metadata"]["name"] == "watchtower-config"
    data = yaml.safe_load(cm["data"]["config.yaml"])
    assert (
        settings_from_mapping(data, env={}).server.external_url == "https://watchtower.internal.example.org"
    )
    (k,) = one(docs, "Deployment")["spec"]["template"]["spec"]["containers"]
    args = [*HELM_VALUES["single"], "--set", "image.repository=registry.internal/ml/watchtower"]
    (h,) = one(helm_template(helm, [*args, "--set", "image.tag=0.1.1"]), "Deployment")["spec"]["template"][
        "spec"
    ]["containers"]
    assert k["image"] == h["image"] == "registry.internal/ml/watchtower:0.1.1"


def test_the_charts_config_value_is_merged_over_what_the_chart_sets(helm: str) -> None:
    values = [*HELM_VALUES["single"], "--set", "config.server.dashboard_url=https://grafana.example.org/d/wt"]
    cm = one(helm_template(helm, [*values, "--set", "config.queue.evaluate_every=30s"]), "ConfigMap")
    settings = settings_from_mapping(yaml.safe_load(cm["data"]["config.yaml"]), env={})
    assert settings.server.dashboard_url == "https://grafana.example.org/d/wt"
    assert settings.server.external_url == EXTERNAL_URL  # the chart's own key survives the merge
    assert settings.queue.evaluate_every == 30.0
