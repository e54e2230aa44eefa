from __future__ import annotations

import sys
from pathlib import Path

import pytest

from .alertmanager import built

# alerts/ is a top-level directory of the checkout (the Alertmanager configuration generator).
sys.path.insert(0, str(Path(__file__).parents[2]))


@pytest.fixture(scope="session")
def webhookcheck() -> str:
    """Alertmanager's own webhook types as a program (built once, cached); fails, not skips, without Go."""
    return built("webhookcheck")
