"""The RBAC files are generated (manifests/rbac.py): a watched kind gets its get/list/watch rule in both files
from `watchtower generate`, one rule an API group, and `--check` fails on a rule edited by hand. That the
committed files are what it writes is tests/artefacts/test_no_drift.py; that they grant exactly the watched
kinds, tests/deploy/test_rbac_kinds.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

from manifests import rbac
from watchtower.domain.forms.registry import WATCHED
from watchtower.domain.kinds import JOB, Kind

ROOT = Path(__file__).resolve().parents[2]
READ = ["get", "list", "watch"]
WIDGET = Kind("Widget", "widgets.example.com", "v1", "widgets", optional=True)


def _rules(text: str, *, helm: bool) -> list[dict[str, Any]]:
    """Return the ClusterRole's rules; the chart's template is cut to its rules, which hold no template."""
    if helm:
        role = text.split("kind: ClusterRole\n", 1)[1].split("\n---", 1)[0]
        rules: list[dict[str, Any]] = yaml.safe_load(role[role.index("rules:") :])["rules"]
        return rules
    doc = next(d for d in yaml.safe_load_all(text) if d and d["kind"] == "ClusterRole")
    return list(doc["rules"])


def _both(kinds: tuple[Kind, ...]) -> dict[str, list[dict[str, Any]]]:
    files = rbac.render_all(kinds)
    return {
        "kustomize": _rules(files[rbac.BASE], helm=False),
        "helm": _rules(files[rbac.HELM], helm=True),
    }


def test_a_new_kind_gets_its_rule_in_both_files_and_a_kind_of_a_read_group_joins_its_rule() -> None:
    before = _both(WATCHED)
    after = _both((*WATCHED, WIDGET, Kind("CronJob", "batch", "v1", "cronjobs")))
    for form in ("kustomize", "helm"):
        added = [r for r in after[form] if r not in before[form]]
        assert added == [
            {"apiGroups": ["batch"], "resources": [JOB.plural, "cronjobs"], "verbs": READ},
            {"apiGroups": ["widgets.example.com"], "resources": ["widgets"], "verbs": READ},
        ], form
        assert len(after[form]) == len(before[form]) + 1, (
            form
        )  # the batch rule grew, one rule for the widgets


def test_one_read_rule_an_api_group_and_the_hand_written_rules_kept_without_any_kind() -> None:
    for form, rules in _both(WATCHED).items():
        groups = [g for r in rules if r["verbs"] == READ for g in r["apiGroups"]]
        assert len(groups) == len(set(groups)), form
    # With no watched kind only the rules that are no kind's read remain: the Event kind's newer group and
    # the visibility API's get.
    for form, rules in _both(()).items():
        assert rules == [
            {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": READ},
            {
                "apiGroups": ["visibility.kueue.x-k8s.io"],
                "resources": ["clusterqueues/pendingworkloads", "localqueues/pendingworkloads"],
                "verbs": ["get"],
            },
        ], form
    base = rbac.render_all(())[rbac.BASE]
    role = next(d for d in yaml.safe_load_all(base) if d and d["kind"] == "Role")
    assert [r["verbs"] for r in role["rules"]] == [["create"], ["get", "update"]]
    helm = rbac.render_all(())[rbac.HELM]
    assert "resourceNames: [{{ $name }}]" in helm and "namespace: {{ .Release.Namespace }}" in helm


def test_every_note_is_above_a_group_that_is_read() -> None:
    assert set(rbac.NOTES) <= set(rbac.read_groups())
    text = rbac.read_rules()
    for group, note in rbac.NOTES.items():
        assert f"  # {note}\n  - apiGroups: [{group}]\n" in text


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    argv = [sys.executable, "-m", "watchtower.cli", "generate", *args]
    return subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, check=False, env=env)


def test_check_names_a_hand_edited_rule_and_generate_puts_it_back(tmp_path: Path) -> None:
    assert _generate("--out", str(tmp_path)).returncode == 0
    base = tmp_path / "deploy" / rbac.BASE
    helm = tmp_path / "deploy" / rbac.HELM
    written = {p: p.read_text() for p in (base, helm)}
    # A rule narrowed in one file, a resource granted beside the watched kinds in the other.
    base.write_text(written[base].replace("resources: [jobsets]", "resources: []", 1))
    helm.write_text(written[helm].replace("resources: [jobsets]", "resources: [jobsets, secrets]", 1))
    done = _generate("--out", str(tmp_path), "--check")
    assert done.returncode == 1
    named = [line for line in done.stderr.splitlines() if line.startswith("out of date: ")]
    assert named == [
        f"out of date: {base} (run watchtower generate)",
        f"out of date: {helm} (run watchtower generate)",
    ]
    assert "secrets" in helm.read_text()  # --check wrote nothing
    done = _generate("--out", str(tmp_path))
    assert done.returncode == 0 and done.stdout.split() == ["wrote", str(base), "wrote", str(helm)]
    assert {p: p.read_text() for p in (base, helm)} == written
