"""The committed rules, promtool tests, Alertmanager config and dashboards are exactly what the generators
write from the default configuration, so users can take them without running Python and they never drift."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from alerts import generate as alerts_generate
from dashboards import generate as dashboards_generate
from watchtower.config import Settings

ROOT = Path(__file__).parents[2]


@pytest.mark.parametrize("module", [alerts_generate, dashboards_generate], ids=["alerts", "dashboards"])
def test_regenerating_from_the_defaults_gives_the_committed_bytes(module) -> None:
    files = module.render_all(Settings())
    assert files
    for rel, text in files.items():
        committed = (module.HERE / rel).read_text(encoding="utf-8")
        assert committed == text, f"{module.HERE / rel} drifted: run make artefacts"


@pytest.mark.parametrize("package", ["alerts", "dashboards"])
def test_check_mode_reports_a_hand_edited_file_and_writes_nothing(package: str, tmp_path: Path) -> None:
    run = [sys.executable, "-m", f"{package}.generate", "--out", str(tmp_path)]
    assert subprocess.run(run, cwd=ROOT, capture_output=True, check=False).returncode == 0
    first = sorted(tmp_path.rglob("*.*"))
    assert first
    first[0].write_text(first[0].read_text() + "\n# edited\n")
    done = subprocess.run([*run, "--check"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 1
    assert "out of date" in done.stderr and first[0].name in done.stderr
    assert first[0].read_text().endswith("# edited\n")


def test_a_bad_configuration_is_a_clear_error_not_a_traceback(tmp_path: Path) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("tiers:\n  - name: x\n    min_priority: 1\n    warn_after: 1h\n    critical_after: 5m\n")
    for package in ("alerts", "dashboards"):
        done = subprocess.run(
            [sys.executable, "-m", f"{package}.generate", "--config", str(cfg), "--out", str(tmp_path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2
        assert "critical_after" in done.stderr and "Traceback" not in done.stderr
