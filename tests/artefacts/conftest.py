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

import promtools  # noqa: E402


@pytest.fixture(scope="session", params=promtools.FLAVOURS)
def promtool(request: pytest.FixtureRequest) -> str:
    """Each test runs with Debian's promtool (2.42) and a current 3.x, since users run both."""
    return promtools.promtool(request.param)


@pytest.fixture(scope="session")
def amtool() -> str:
    """Fails (not skips) when missing: tests/setup/system-deps.sh installs prometheus-alertmanager."""
    exe = shutil.which("amtool")
    if exe is None:
        pytest.fail("amtool not on PATH: run tests/setup/system-deps.sh")
    return exe
