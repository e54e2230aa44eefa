from __future__ import annotations

import sys
from pathlib import Path

import pytest

# alerts/, dashboards/ and manifests/ are top-level directories of the checkout, not installed packages; the
# CRD schema helper sits beside the tests; the two promtools are found by tests/prometheus/promtools.py.
sys.path.insert(0, str(Path(__file__).parents[2]))
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[1] / "prometheus"))

import promtools  # noqa: E402


@pytest.fixture(scope="session", params=promtools.FLAVOURS)
def promtool(request: pytest.FixtureRequest) -> str:
    """Each test runs with Debian's promtool (2.42) and a current 3.x, since users run both."""
    return promtools.promtool(request.param)
