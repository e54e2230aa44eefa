from __future__ import annotations

import pytest

from tests.alerting.alertmanager import built


@pytest.fixture(scope="session")
def webhookcheck() -> str:
    """Alertmanager's own webhook types as a program (built once, cached); fails, not skips, without Go."""
    return built("webhookcheck")
