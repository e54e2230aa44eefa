"""`watchtower demo` stopped by SIGTERM (kill, a terminal closing, a pod stopping) stops what it started,
as Ctrl-C does, and exits 0 well within Kubernetes' 30 s grace.

The bound is generous (15 s; the orderly stop takes about a second here): what it catches is a part that
outlives the service (a non-daemon thread, a child process, a worker thread blocked in the loop's executor,
uvicorn waiting for a connection to close), which keeps the interpreter alive with its logging stopped
until a second signal. Its output is drained all along, so a full pipe cannot be what holds it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

STOP_WITHIN = 15.0


def _listening(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.5)
        return s.connect_ex(("127.0.0.1", port)) == 0


class Demo:
    """`watchtower demo` as a subprocess, its output read by a thread as it comes."""

    def __init__(self, tmp_path: Path, *args: str) -> None:
        env = {**os.environ, "TMPDIR": str(tmp_path)}
        self.p = subprocess.Popen(
            [sys.executable, "-m", "watchtower.cli", "demo", "--port", "0", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
        self.lines: list[str] = []
        self.ready = threading.Event()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.p.stdout is not None
        for line in self.p.stdout:
            self.lines.append(line)
            if "API token" in line:
                self.ready.set()

    def output(self) -> str:
        return "".join(self.lines)

    def url(self, name: str) -> int | None:
        for line in self.lines:
            m = re.search(rf"{name}\s+http://127\.0\.0\.1:(\d+)/", line)
            if m:
                return int(m.group(1))
        return None

    def stop_by_sigterm(self) -> tuple[int | None, float]:
        t0 = time.monotonic()
        self.p.send_signal(signal.SIGTERM)
        try:
            rc: int | None = self.p.wait(timeout=STOP_WITHIN)
        except subprocess.TimeoutExpired:
            rc = None
        return rc, time.monotonic() - t0

    def kill(self) -> None:
        if self.p.poll() is None:
            self.p.kill()
            self.p.wait()


def test_sigterm_ends_the_demo_with_exit_code_0_within_the_bound_and_frees_its_port(tmp_path: Path) -> None:
    demo = Demo(tmp_path, "--no-prometheus")
    try:
        assert demo.ready.wait(120), demo.output()
        port = demo.url("status page")
        assert port is not None and _listening(port)
        time.sleep(3)  # ticks, notifications and page builds under way, as when a user presses Ctrl-C
        rc, took = demo.stop_by_sigterm()
        assert rc == 0, f"still running {STOP_WITHIN:g}s after SIGTERM (rc {rc}):\n{demo.output()[-3000:]}"
        assert not _listening(port)
        assert not list(tmp_path.glob("watchtower-demo-*")), "the demo's files were left behind"
    finally:
        demo.kill()


@pytest.mark.prometheus
def test_sigterm_stops_the_demos_prometheus_and_removes_its_files(tmp_path: Path) -> None:
    if shutil.which("prometheus") is None:
        pytest.skip("prometheus is not installed (tests/setup/system-deps.sh installs it)")
    demo = Demo(tmp_path)
    try:
        assert demo.ready.wait(120), demo.output()
        prom = demo.url("Prometheus")
        assert prom is not None, demo.output()
        assert _listening(prom)
        assert list(tmp_path.glob("watchtower-demo-*"))
        time.sleep(3)
        rc, took = demo.stop_by_sigterm()
        assert rc == 0, f"still running {STOP_WITHIN:g}s after SIGTERM (rc {rc}):\n{demo.output()[-3000:]}"
        assert not _listening(prom), "the demo's Prometheus outlived it"
        assert not list(tmp_path.glob("watchtower-demo-*")), "the demo's files were left behind"
    finally:
        demo.kill()
