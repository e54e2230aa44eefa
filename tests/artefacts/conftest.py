from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
# alerts/ and dashboards/ are top-level directories of the checkout, not installed packages.
sys.path.insert(0, str(ROOT))
# The real-Prometheus helpers of tests/prometheus (process by pid, exporter servers on 127.0.0.1).
sys.path.insert(0, str(Path(__file__).parents[1] / "prometheus"))


@pytest.fixture(scope="session")
def promtool() -> str:
    """Fails (not skips) when missing: tests/setup/system-deps.sh installs the Debian package prometheus."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not on PATH: run tests/setup/system-deps.sh")
    return exe


@pytest.fixture(scope="session")
def amtool() -> str:
    """Fails (not skips) when missing: tests/setup/system-deps.sh installs prometheus-alertmanager."""
    exe = shutil.which("amtool")
    if exe is None:
        pytest.fail("amtool not on PATH: run tests/setup/system-deps.sh")
    return exe
