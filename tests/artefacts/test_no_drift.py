"""The committed rules, promtool tests, Alertmanager config, Grafana alert rules and dashboards are exactly
what `watchtower generate` writes from the default configuration, so users can take them without running
Python and they never drift; `--check` names what drifted, and a wrong input is a clear error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from alerts import generate as alerts_generate
from dashboards import generate as dashboards_generate
from manifests import generate as manifests_generate
from watchtower.commands import generate as artefacts
from watchtower.config import Settings

ROOT = Path(__file__).parents[2]
CLI = [sys.executable, "-m", "watchtower.cli", "generate"]


def _generate(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([*CLI, *args], cwd=ROOT, capture_output=True, text=True, check=False, env=env)


def test_regenerating_from_the_defaults_gives_the_committed_bytes() -> None:
    files = artefacts.render(Settings())
    assert {p.parts[0] for p in files} == {"alerts", "dashboards", "deploy"}
    assert Path("alerts") / alerts_generate.GRAFANA_RULES in files
    for rel, text in files.items():
        committed = (ROOT / rel).read_text(encoding="utf-8")
        assert committed == text, f"{rel} drifted: run make artefacts"
    assert len(files) == len(alerts_generate.render_all(Settings())) + len(
        dashboards_generate.render_all(Settings())
    ) + len(manifests_generate.render_all(Settings()))


def test_check_passes_on_the_checkout_and_names_a_hand_edited_file(tmp_path: Path) -> None:
    assert _generate("--check").returncode == 0
    done = _generate("--out", str(tmp_path))
    assert done.returncode == 0, done.stderr
    written = sorted(p for p in tmp_path.rglob("*") if p.is_file())
    assert len(written) == len(artefacts.render(Settings()))
    edited = tmp_path / "dashboards" / "generated" / "watchtower-queue.json"
    edited.write_text(edited.read_text() + "\n")
    gone = tmp_path / alerts_generate.GRAFANA_RULES.name
    (tmp_path / "alerts" / alerts_generate.GRAFANA_RULES).rename(gone)
    done = _generate("--out", str(tmp_path), "--check")
    assert done.returncode == 1
    named = [line for line in done.stderr.splitlines() if line.startswith("out of date: ")]
    assert len(named) == 2, done.stderr
    assert str(edited) in done.stderr and "grafana-alert-rules.yaml" in done.stderr
    assert edited.read_text().endswith("}\n\n")  # --check wrote nothing
    assert not (tmp_path / "alerts" / alerts_generate.GRAFANA_RULES).exists()


def test_a_missing_configuration_file_is_a_clear_error_with_exit_2(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.yaml"
    done = _generate("--config", str(missing), "--out", str(tmp_path))
    assert done.returncode == 2
    assert f"{missing}: configuration is not valid" in done.stderr
    assert "cannot read: No such file or directory" in done.stderr and "Traceback" not in done.stderr
    assert not any(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "tiers:\n  - name: x\n    min_priority: 1\n    warn_after: 1h\n    critical_after: 5m\n",
            "critical_after",
        ),
        ("prometheus:\n  url: http://127.0.0.1:9\n  scrape_interval: 5m\n  idle_window: 10m\n", "4 ×"),
    ],
    ids=["invalid tiers", "window shorter than four scrapes"],
)
def test_a_configuration_the_artefacts_cannot_follow_is_a_clear_error(
    tmp_path: Path, text: str, says: str
) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    done = _generate("--config", str(cfg), "--out", str(tmp_path / "out"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "out").exists()


def test_generate_into_a_fresh_directory_then_check_is_clean(tmp_path: Path) -> None:
    assert _generate("--out", str(tmp_path)).returncode == 0
    again = _generate("--out", str(tmp_path))
    assert again.returncode == 0 and again.stdout == ""  # nothing changed, nothing rewritten
    assert _generate("--out", str(tmp_path), "--check").returncode == 0
