"""The two promtools users run: Debian's (2.42, package `prometheus`) and a current 3.x built from the
github.com/prometheus/prometheus Go module by tests/setup/build-promtool3.sh. Tests that run promtool take
the `promtool` fixture parametrised over FLAVOURS."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

BUILD = Path(__file__).parents[1] / "setup" / "build-promtool3.sh"
FLAVOURS = ("debian", "current")
NO_GO = 4  # build-promtool3.sh: no Go to build with, and no WATCHTOWER_PROMTOOL3


def promtool(flavour: str) -> str:
    """Return the path of one flavour's promtool. Debian's missing fails (system-deps.sh installs it); the
    current one not built fails, naming the script; it skips, with the script's reason, only when it cannot
    be built here at all (no Go and no WATCHTOWER_PROMTOOL3)."""
    if flavour == "debian":
        exe = shutil.which("promtool")
        if exe is None:
            pytest.fail("promtool not on PATH: run tests/setup/system-deps.sh (Debian package prometheus)")
        return exe
    if flavour != "current":
        raise ValueError(f"unknown promtool flavour {flavour!r}: one of {FLAVOURS}")
    done = subprocess.run([str(BUILD), "--no-build"], capture_output=True, text=True, check=False)
    reason = done.stderr.strip()
    if done.returncode == NO_GO:
        pytest.skip(f"promtool 3 cannot be built on this machine: {reason}")
    if done.returncode != 0:
        pytest.fail(f"{BUILD.name} --no-build exited {done.returncode}: {reason}")
    return done.stdout.strip().splitlines()[-1]
