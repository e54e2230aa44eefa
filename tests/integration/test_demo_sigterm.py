"""`watchtower demo` stopped by SIGTERM (kill, a terminal closing) stops what it started, as Ctrl-C does."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.prometheus


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_sigterm_stops_the_demos_prometheus_and_removes_its_files(tmp_path: Path) -> None:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (tests/setup/system-deps.sh installs it)")
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    p = subprocess.Popen(
        [sys.executable, "-m", "watchtower.cli", "demo", "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    try:
        lines: list[str] = []
        deadline = time.monotonic() + 120
        prom = None
        while time.monotonic() < deadline and p.stdout is not None:
            line = p.stdout.readline()
            lines.append(line)
            m = re.search(r"Prometheus\s+http://127\.0\.0\.1:(\d+)/", line)
            if m:
                prom = int(m.group(1))
            if "API token" in line:
                break
        assert prom is not None, "".join(lines)
        assert _listening(prom)
        assert list(tmp_path.glob("watchtower-demo-*"))
        p.send_signal(signal.SIGTERM)
        assert p.wait(timeout=60) == 0, "".join(lines)
        assert not _listening(prom), "the demo's Prometheus outlived it"
        assert not list(tmp_path.glob("watchtower-demo-*")), "the demo's files were left behind"
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
