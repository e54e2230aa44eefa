"""The RBAC the service ships reads exactly the kinds it watches: a queue form's kinds (domain/kinds.py)
cannot be added without their rule, and no read rule outlives the form that needed it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from watchtower.domain.forms.registry import WATCHED

ROOT = Path(__file__).resolve().parents[2]
BASE = ROOT / "deploy" / "base" / "rbac.yaml"
HELM = ROOT / "deploy" / "helm" / "watchtower" / "templates" / "rbac.yaml"
# Granted beside the watched kinds: the Event kind's newer API group (the decoder reads both shapes).
ALSO_READ = {("events.k8s.io", "events")}


def _cluster_role_rules(path: Path) -> list[dict[str, Any]]:
    """Return the ClusterRole's rules; the chart's template is cut to its rules, which hold no template."""
    text = path.read_text()
    if path == HELM:
        role = text.split("kind: ClusterRole\n", 1)[1].split("\n---", 1)[0]
        rules: list[dict[str, Any]] = yaml.safe_load(role[role.index("rules:") :])["rules"]
        return rules
    doc = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "ClusterRole")
    return list(doc["rules"])


@pytest.mark.parametrize("path", [BASE, HELM], ids=["kustomize", "helm"])
def test_the_cluster_role_reads_exactly_the_watched_kinds(path: Path) -> None:
    read = {
        (group, resource)
        for rule in _cluster_role_rules(path)
        if {"get", "list", "watch"} <= set(rule["verbs"])
        for group in rule["apiGroups"]
        for resource in rule["resources"]
    }
    assert read == {(k.group, k.plural) for k in WATCHED} | ALSO_READ
