"""What the adapter benchmarks share: the pod server process, a kubeconfig for it, memory readings."""

from __future__ import annotations

import contextlib
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent


@contextlib.contextmanager
def pod_server(*, pods: int = 0, page: int = 500, watch_events: int = 0) -> Iterator[tuple[str, Path]]:
    """Start bench/_podgen.py serve in its own process; yield (url, kubeconfig path); stop it by pid."""
    with tempfile.TemporaryDirectory() as d:
        port_file = Path(d) / "port"
        cmd = [sys.executable, str(HERE / "_podgen.py"), "serve", "--port-file", str(port_file)]
        cmd += ["--pods", str(pods), "--page", str(page), "--watch-events", str(watch_events)]
        proc = subprocess.Popen(cmd)
        try:
            while not port_file.exists() or not port_file.read_text():
                if proc.poll() is not None:
                    raise SystemExit(f"pod server exited with {proc.returncode}")
                time.sleep(0.1)
            url = f"http://127.0.0.1:{port_file.read_text()}"
            kubeconfig = kubeconfig_for(url, Path(d) / "kubeconfig")
            yield url, kubeconfig
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def kubeconfig_for(url: str, path: Path) -> Path:
    """Write a kubeconfig for an API server at `url` (a bench token, no TLS) to `path`; return the path."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "bench", "cluster": {"server": url}}],
                "users": [{"name": "bench", "user": {"token": "bench"}}],
                "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "bench"}}],
                "current-context": "bench",
            }
        )
    )
    return path


def proc_rss_bytes(pid: int) -> int:
    """Return another process's resident set size from /proc (0 once it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def proc_cpu_seconds(pid: int) -> float:
    """Return the user + system CPU seconds another process has used, from /proc/PID/stat."""
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces; the fields after its closing parenthesis are fixed.
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_bytes() -> int:
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def peak_rss_bytes() -> int:
    """Return the RSS high-water mark: since the last reset_peak_rss(), where /proc allows resetting it."""
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # KiB on Linux


def reset_peak_rss() -> None:
    """Reset this process's RSS high-water mark (VmHWM), so a later reading covers only what follows."""
    with open(f"/proc/{os.getpid()}/clear_refs", "w") as f:
        f.write("5")
