"""The browser tests drive the pages of the same in-process service the API's unit tests use: its fixtures
(`service`, and `live`, the service on a real socket) are defined once, in tests/unit/api/conftest.py."""

from __future__ import annotations

from tests.unit.api.conftest import live, service

__all__ = ["live", "service"]
