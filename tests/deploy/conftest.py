from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

# alerts/, dashboards/ and manifests/ are top-level directories of the checkout, not installed packages; the
# CRD schema helper sits beside the tests.
sys.path.insert(0, str(Path(__file__).parents[2]))
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def promtool() -> str:
    """Fails (not skips) when missing: tests/setup/system-deps.sh installs the Debian package prometheus."""
    exe = shutil.which("promtool")
    if exe is None:
        pytest.fail("promtool not on PATH: run tests/setup/system-deps.sh")
    return exe
