from __future__ import annotations

import shutil

import pytest

# alerts/ and dashboards/ are top-level directories of the checkout, importable by pytest's `pythonpath`.
from tests.prometheus import promtools


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
