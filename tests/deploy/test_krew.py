"""deploy/krew/watchtower.yaml is a template the release fills: what Krew needs is there, and every value only
the release knows is a marked placeholder (docs/kubectl.md)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

KREW = Path(__file__).resolve().parents[2] / "deploy" / "krew" / "watchtower.yaml"


def test_the_krew_manifest_names_the_plugin_and_leaves_release_values_as_placeholders() -> None:
    text = KREW.read_text()
    doc = yaml.safe_load(text)
    assert doc["kind"] == "Plugin" and doc["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert doc["metadata"]["name"] == "watchtower"
    spec = doc["spec"]
    assert spec["shortDescription"] and len(spec["shortDescription"]) < 50 and spec["description"]
    (platform,) = spec["platforms"]
    assert platform["bin"] == "kubectl-watchtower"
    assert {f["from"] for f in platform["files"]} >= {"kubectl-watchtower"}
    assert spec["version"] == "<<VERSION>>"
    assert platform["uri"] == "<<ARCHIVE_URL>>" and platform["sha256"] == "<<ARCHIVE_SHA256>>"
    assert set(re.findall(r"<<([A-Z0-9_]+)>>", text)) == {
        "VERSION",
        "HOMEPAGE_URL",
        "ARCHIVE_URL",
        "ARCHIVE_SHA256",
    }
