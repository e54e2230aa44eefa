"""`watchtower --version` and the help a new user reads first, through the real command line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from importlib.metadata import version

CLI = [sys.executable, "-m", "watchtower.cli"]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *args], capture_output=True, text=True, timeout=60, env={**os.environ, "COLUMNS": "100"}
    )


def test_version_prints_the_package_version_and_exits_0() -> None:
    r = cli("--version")
    assert (r.returncode, r.stdout, r.stderr) == (0, f"watchtower {version('watchtower')}\n", "")


def test_run_help_names_each_option_with_its_type_and_flags_bare() -> None:
    r = cli("run", "--help")
    assert r.returncode == 0, r.stderr
    assert re.search(r"--config\s+PATH\s+YAML configuration file", r.stdout), r.stdout
    assert re.search(r"--port\s+INTEGER RANGE \[0<=x<=65535\]\s+listen port", r.stdout), r.stdout
    assert re.search(r"--help\s+Show this message and exit", r.stdout), r.stdout
    assert "<bool>" not in r.stdout and "<int>" not in r.stdout


def test_top_level_help_lists_version_and_the_commands() -> None:
    r = cli("--help")
    assert r.returncode == 0, r.stderr
    assert re.search(r"--version\s+Print the version and exit", r.stdout), r.stdout
    for command in ("check-config", "analyze", "run", "demo"):
        assert re.search(rf"│ {command}\s", r.stdout), command


def test_a_port_out_of_range_is_refused_before_anything_starts() -> None:
    for cmd in (["run", "--config", "watchtower/config.example.yaml"], ["demo"]):
        r = cli(*cmd, "--port", "99999")
        assert r.returncode == 2
        assert "99999 is not in the range 0<=x<=65535" in r.stderr, r.stderr
