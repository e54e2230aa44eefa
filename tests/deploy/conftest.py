from __future__ import annotations

import pytest

# alerts/, dashboards/ and manifests/ are top-level directories of the checkout, importable by pytest's
# `pythonpath`; the two promtools are found by tests/prometheus/promtools.py.
from tests.prometheus import promtools


@pytest.fixture(scope="session", params=promtools.FLAVOURS)
def promtool(request: pytest.FixtureRequest) -> str:
    """Each test runs with Debian's promtool (2.42) and a current 3.x, since users run both."""
    return promtools.promtool(request.param)
