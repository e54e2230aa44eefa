"""The prometheus-operator CRDs the forms are validated against: reproduced from the Go module by the script,
and a validator that rejects what the API server (or the operator) would."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.deploy.crd_schema import load_crds

ROOT = Path(__file__).resolve().parents[2]
CRDS = ROOT / "tests" / "fixtures" / "crds" / "prometheus-operator"
SCRIPT = ROOT / "tests" / "setup" / "prometheus-operator-crds.sh"


@pytest.mark.gobuilt
@pytest.mark.skipif(shutil.which("go") is None, reason="needs Go to run controller-gen over the module")
def test_the_script_reproduces_the_committed_crds(tmp_path: Path) -> None:
    done = subprocess.run(
        [str(SCRIPT), str(tmp_path)], capture_output=True, text=True, check=False, timeout=1200
    )
    assert done.returncode == 0, done.stderr[-3000:]
    made = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert made == sorted(p.name for p in CRDS.glob("*.yaml"))
    for name in made:
        assert (tmp_path / name).read_bytes() == (CRDS / name).read_bytes(), f"{name} differs: rerun {SCRIPT}"


def _rule(**spec: object) -> dict:
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": {"name": "r", "namespace": "n"},
        "spec": spec,
    }


def test_the_validator_accepts_a_plain_rule_and_an_integer_expression() -> None:
    crd = load_crds(CRDS)["PrometheusRule"]
    groups = [
        {"name": "g", "rules": [{"alert": "A", "expr": "up == 0", "for": "5m"}, {"record": "r", "expr": 1}]}
    ]
    assert crd.errors(_rule(groups=groups)) == []


@pytest.mark.parametrize(
    ("groups", "problem"),
    [
        ([{"name": "g", "rules": [{"alert": "A", "expr": "up", "fro": "5m"}]}], "fro"),  # pruned: lost
        ([{"name": "g", "rules": [{"alert": "A", "expr": "up", "for": "5 minutes"}]}], "does not match"),
        ([{"name": "g", "rules": [{"alert": "A"}]}], "'expr' is a required property"),
        ([{"name": "g", "rules": [{"alert": "A", "expr": 1.5}]}], "1.5"),
        ([{"name": "g", "rules": []}, {"name": "g", "rules": []}], "duplicate entry"),
        ([{"name": "", "rules": []}], "non-empty"),
    ],
    ids=["unknown-field", "bad-duration", "missing-expr", "float-expr", "duplicate-group", "empty-name"],
)
def test_the_validator_rejects_what_the_api_server_would(groups: list, problem: str) -> None:
    errors = load_crds(CRDS)["PrometheusRule"].errors(_rule(groups=groups))
    assert errors and any(problem in e for e in errors), errors


def test_a_field_guarded_by_a_cel_rule_fails_rather_than_passing_unchecked() -> None:
    crd = load_crds(CRDS)["AlertmanagerConfig"]
    obj = {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": {"name": "a", "namespace": "n"},
        "spec": {"receivers": [{"name": "r", "snsConfigs": [{"sigv4": {"externalId": "x"}}]}]},
    }
    assert any("CEL rule not evaluated offline" in e for e in crd.errors(obj))
