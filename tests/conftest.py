"""Fixtures every test directory may use: the alert store on each supported database (tests/fixtures/stores.py)."""

from __future__ import annotations

import sys
from pathlib import Path

# The checkout's root, so that tests/fixtures is importable whichever directory pytest starts from.
sys.path.insert(0, str(Path(__file__).parents[1]))

from tests.fixtures.stores import postgres_server, store_backend  # noqa: E402

__all__ = ["postgres_server", "store_backend"]
