"""tests/setup/build-promtool3.sh: what it answers the tests and `make test` when promtool 3 is built, cannot
be built, or is named by WATCHTOWER_PROMTOOL3. Nothing here builds: each case stops before `go install`."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.prometheus import promtools

SCRIPT = Path(__file__).with_name("build-promtool3.sh")


def _bare_path(tmp_path: Path) -> Path:
    """A bin directory with bash and what the script runs before Go, and no `go`."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    for tool in ("bash", "dirname", "cat", "sort", "head", "sed"):
        src = Path(f"/usr/bin/{tool}") if Path(f"/usr/bin/{tool}").exists() else Path(f"/bin/{tool}")
        (bindir / tool).symlink_to(src)
    return bindir


def _run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, check=False)


def test_without_go_it_says_what_it_needs_and_exits_4(tmp_path: Path) -> None:
    env = {"PATH": str(_bare_path(tmp_path)), "WATCHTOWER_CACHE": str(tmp_path / "cache")}
    done = _run(env)
    assert done.returncode == promtools.NO_GO
    assert "needs Go >= 1.26.7" in done.stderr and "WATCHTOWER_PROMTOOL3" in done.stderr
    assert not (tmp_path / "cache").exists()


def test_a_built_binary_is_answered_at_once_without_go(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    exe = cache / "promtool-v0.316.0" / "bin" / "promtool"
    exe.parent.mkdir(parents=True)
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    env = {"PATH": str(_bare_path(tmp_path)), "WATCHTOWER_CACHE": str(cache)}
    for args in ((), ("--no-build",)):
        done = _run(env, *args)
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip() == str(exe)


def test_not_built_yet_with_go_the_tests_are_told_to_build_it(tmp_path: Path) -> None:
    env = {**os.environ, "WATCHTOWER_CACHE": str(tmp_path / "cache")}
    env.pop("WATCHTOWER_PROMTOOL3", None)
    done = _run(env, "--no-build")
    if done.returncode == promtools.NO_GO:
        pytest.skip(f"no usable Go on this machine: {done.stderr.strip()}")
    assert done.returncode == 5
    assert "not built yet" in done.stderr and "make promtool3" in done.stderr


def test_an_override_that_is_no_executable_is_refused(tmp_path: Path) -> None:
    env = {"PATH": str(_bare_path(tmp_path)), "WATCHTOWER_PROMTOOL3": str(tmp_path / "missing")}
    done = _run(env)
    assert done.returncode == 3
    assert "WATCHTOWER_PROMTOOL3" in done.stderr and "missing" in done.stderr


def test_an_override_is_answered_as_is(tmp_path: Path) -> None:
    exe = tmp_path / "promtool"
    exe.write_text("#!/bin/sh\n")
    exe.chmod(0o755)
    done = _run({"PATH": str(_bare_path(tmp_path)), "WATCHTOWER_PROMTOOL3": str(exe)})
    assert done.returncode == 0 and done.stdout.strip() == str(exe)
