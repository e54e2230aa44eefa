from __future__ import annotations

from pathlib import Path

import pytest

from tests.prometheus import promtools
from tests.prometheus.prom_server import have_prometheus


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.fspath)).parent == here and "real_prometheus" in item.fixturenames:
            item.add_marker(pytest.mark.prometheus)


@pytest.fixture(scope="session")
def real_prometheus() -> None:
    """Fails (not skips) when the binaries are missing: tests/setup/system-deps.sh installs them."""
    if not have_prometheus():
        pytest.fail("prometheus/promtool not on PATH: run tests/setup/system-deps.sh")


@pytest.fixture(scope="session", params=promtools.FLAVOURS)
def promtool(request: pytest.FixtureRequest) -> str:
    """Each test runs with Debian's promtool (2.42) and a current 3.x, since users run both."""
    return promtools.promtool(request.param)
