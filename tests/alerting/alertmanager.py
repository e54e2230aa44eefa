"""A real Alertmanager for the tests: Debian's (0.25, `prometheus-alertmanager`) and a current release built
from its Go module by tests/setup/build-alertmanager.sh, with the program tests/go/webhookcheck that reads
Watchtower's bodies with Alertmanager's own Go types. Each process listens on 127.0.0.1 and is stopped by
its pid."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from tests.alerting.servers import free_port

ROOT = Path(__file__).parents[2]
BUILD = ROOT / "tests" / "setup" / "build-alertmanager.sh"
CURRENT = "0.35.0"


def built(what: str = "") -> str:
    """Return the build script's answer (the bin directory, or webhookcheck's path); fail if it fails."""
    done = subprocess.run(
        [str(BUILD), *([what] if what else [])], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.fail(f"{BUILD.name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")
    return done.stdout.strip().splitlines()[-1]


def binaries(flavour: str) -> tuple[str, str]:
    """Return (alertmanager, amtool) of one flavour: "debian" (0.25 on PATH) or "current" (built)."""
    if flavour == "debian":
        am, tool = shutil.which("prometheus-alertmanager"), shutil.which("amtool")
        if am is None or tool is None:
            pytest.fail("prometheus-alertmanager not installed: run tests/setup/system-deps.sh")
        return am, tool
    bin_dir = Path(built())
    return str(bin_dir / "alertmanager"), str(bin_dir / "amtool")


def check(webhookcheck: str, mode: str, data: bytes, *args: str) -> str:
    """Run webhookcheck; return what it printed; fail the test with its error if it refused the input."""
    done = subprocess.run([webhookcheck, mode, *args], input=data, capture_output=True, check=False)
    if done.returncode != 0:
        pytest.fail(done.stderr.decode(errors="replace"))
    return done.stdout.decode()


def check_json(webhookcheck: str, mode: str, doc: object, *args: str) -> list[str]:
    return check(webhookcheck, mode, json.dumps(doc).encode(), *args).splitlines()


class Alertmanager:
    """One Alertmanager process on free 127.0.0.1 ports, with its data directory; `peers` makes a cluster."""

    def __init__(self, exe: str, config: Path, data: Path, *, peers: tuple[str, ...] = (), cluster=False):
        self.exe, self.config, self.data, self.peers, self.cluster = exe, config, data, peers, cluster
        self.port = free_port()
        self.cluster_port = free_port() if cluster or peers else 0
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = data / "alertmanager.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def peer(self) -> str:
        return f"127.0.0.1:{self.cluster_port}"

    def start(self, timeout: float = 30.0) -> Alertmanager:
        self.data.mkdir(parents=True, exist_ok=True)
        args = [
            self.exe,
            f"--config.file={self.config}",
            f"--storage.path={self.data}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            f"--web.external-url={self.url}",
            "--log.level=debug",
        ]
        if self.cluster_port:
            args += [
                f"--cluster.listen-address=127.0.0.1:{self.cluster_port}",
                f"--cluster.advertise-address=127.0.0.1:{self.cluster_port}",
                # Loopback peers gossip at once; the defaults are tuned for a data centre.
                "--cluster.peer-timeout=2s",
                "--cluster.gossip-interval=100ms",
                "--cluster.pushpull-interval=1s",
                "--cluster.settle-timeout=2s",
            ]
            args += [f"--cluster.peer={p}" for p in self.peers]
        else:
            args.append("--cluster.listen-address=")  # no gossip port for a lone instance
        self.proc = subprocess.Popen(args, stdout=self.log.open("ab"), stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                pytest.fail(f"alertmanager exited {self.proc.returncode}: {self.log.read_text()[-3000:]}")
            try:
                if httpx.get(self.url + "/-/ready", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        self.stop()
        pytest.fail(f"alertmanager not ready after {timeout}s: {self.log.read_text()[-3000:]}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, sig)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        self.proc = None
