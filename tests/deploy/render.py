"""Rendering deploy/ as users do: `kustomize build` of an overlay and `helm template` of the chart, with the
binaries tests/setup/build-deploy-tools.sh builds from their Go modules (no stand-in: the point is what the
real tools make of the files)."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"
CHART = DEPLOY / "helm" / "watchtower"
BUILD = ROOT / "tests" / "setup" / "build-deploy-tools.sh"
NO_GO = 4  # build-deploy-tools.sh: no Go to build with, and no WATCHTOWER_<TOOL>
OVERLAYS = ("single", "ha")
# What an installation must review before it works (the placeholder of the overlays' config.yaml).
EXTERNAL_URL = "https://watchtower.example.com"
# The values that make the chart render what an overlay does.
HELM_VALUES: dict[str, list[str]] = {
    "single": ["--set", f"externalURL={EXTERNAL_URL}"],
    "ha": ["--set", f"externalURL={EXTERNAL_URL}", "--set", "ha.enabled=true"],
}


def tool(name: str) -> str:
    """Return the path of kustomize or helm. Not built yet fails, naming the script; it skips, with the
    script's reason, only when it cannot be built here at all (no Go and no WATCHTOWER_<TOOL>)."""
    done = subprocess.run([str(BUILD), name, "--no-build"], capture_output=True, text=True, check=False)
    reason = done.stderr.strip()
    if done.returncode == NO_GO:
        pytest.skip(f"{name} cannot be built on this machine: {reason}")
    if done.returncode != 0:
        pytest.fail(f"{BUILD.name} {name} --no-build exited {done.returncode}: {reason}")
    return done.stdout.strip().splitlines()[-1]


def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=120)


def documents(text: str) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(text) if d]


def kustomize_build(kustomize: str, overlay: str | Path) -> list[dict[str, Any]]:
    path = overlay if isinstance(overlay, Path) else DEPLOY / "overlays" / overlay
    done = run([kustomize, "build", str(path)])
    assert done.returncode == 0, f"kustomize build {path} failed:\n{done.stderr}"
    return documents(done.stdout)


def helm_template(
    helm: str, args: list[str], *, release: str = "watchtower", namespace: str = "watchtower"
) -> list[dict[str, Any]]:
    done = run([helm, "template", release, str(CHART), "--namespace", namespace, *args])
    assert done.returncode == 0, f"helm template {' '.join(args)} failed:\n{done.stderr}"
    return documents(done.stdout)


def key(doc: dict[str, Any]) -> str:
    return f"{doc['kind']}/{doc['metadata'].get('namespace', '')}/{doc['metadata']['name']}"


def one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [d for d in docs if d["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {[key(d) for d in found]}"
    return found[0]
