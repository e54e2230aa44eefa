"""A local Prometheus for the demo: scrapes the simulator's exporter and Watchtower's own /metrics.

`start_local_prometheus` runs the `prometheus` binary (Debian package `prometheus`) on 127.0.0.1 with a
generated configuration and a fresh data directory, waits until it is ready and returns it; without the
binary it returns None and logs how to install it, so the demo still runs, without GPU utilisation.
The jobs are named as on a real cluster (`dcgm-exporter`, `kube-state-metrics`, `watchtower`), so the
queries of domain/promql/ run unchanged against it.
"""

from __future__ import annotations

import logging
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from watchtower.domain.promql.syntax import duration

log = logging.getLogger(__name__)

INSTALL_HINT = (
    "the prometheus binary is not installed: install the Debian package prometheus "
    "(sudo apt-get install prometheus) to see GPU utilisation in the demo"
)


class LocalPrometheusError(RuntimeError):
    """The binary is there but Prometheus did not come up (bad flags, port taken, not ready in time)."""


def scrape_config(*, exporter: str, watchtower: str | None = None, scrape_interval: float = 5.0) -> str:
    """Return a prometheus.yml scraping the simulator's exporter at `exporter` (host:port) and, when given,
    Watchtower's /metrics at `watchtower` (host:port).

    `honor_labels: true` on the exporter jobs, as clusters scrape dcgm-exporter and kube-state-metrics: their
    own `pod`/`namespace` labels name the workload, not the scrape target."""
    every = duration(scrape_interval)
    jobs = [
        ("dcgm-exporter", exporter, "/metrics/dcgm", True),
        ("kube-state-metrics", exporter, "/metrics/kube-state-metrics", True),
    ]
    if watchtower:
        jobs.append(("watchtower", watchtower, "/metrics", False))
    lines = [
        "global:",
        f"  scrape_interval: {every}",
        f"  scrape_timeout: {every}",
        f"  evaluation_interval: {every}",
        "scrape_configs:",
    ]
    for name, target, path, honor in jobs:
        lines += [
            f"  - job_name: {name}",
            f"    metrics_path: {path}",
            f"    honor_labels: {str(honor).lower()}",
            "    static_configs:",
            f"      - targets: ['{target}']",
        ]
    return "\n".join(lines) + "\n"


@dataclass
class LocalPrometheus:
    """A running Prometheus: its process, its URL, and the directory holding its config, data and log."""

    process: subprocess.Popen[bytes]
    url: str
    workdir: Path
    _owns_workdir: bool = True
    command: tuple[str, ...] = ()  # how it was started, for `restart`
    # Restarts may come from two threads (the demo's past week: each day's blocks, then the last): one at a time.
    _restarting: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def data_dir(self) -> Path:
        return self.workdir / "data"

    @property
    def log_path(self) -> Path:
        return self.workdir / "prometheus.log"

    def log_tail(self, chars: int = 2000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""

    def restart(self, ready_timeout: float = 60.0) -> None:
        """Stop this process and start it again with the same flags, port and data, and wait until it is
        ready: what makes it load blocks written into its data directory now rather than on its next
        block reload (every minute after it started, in Prometheus 2 and 3). Its head (the live samples)
        is replayed from the write-ahead log; queries meanwhile fail for a second or two."""
        with self._restarting:
            self._terminate()
            self.process = _spawn(self.command, self.log_path)
            _wait_ready(self, ready_timeout)

    def _terminate(self, timeout: float = 30.0) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)

    def stop(self, timeout: float = 30.0) -> None:
        """Stop this process (by its pid, SIGTERM then SIGKILL) and remove the work directory if ours."""
        self._terminate(timeout)
        if self._owns_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ready(url: str) -> bool:
    try:
        return httpx.get(f"{url}/-/ready", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def start_local_prometheus(
    *,
    exporter_port: int,
    watchtower_port: int | None = None,
    port: int = 0,
    scrape_interval: float = 5.0,
    workdir: Path | None = None,
    binary: str = "prometheus",
    ready_timeout: float = 60.0,
    retention: float | None = None,
    lookback_delta: float | None = None,
) -> LocalPrometheus | None:
    """Start Prometheus on 127.0.0.1:`port` (0: a free port) scraping the simulator's exporter on
    127.0.0.1:`exporter_port` and Watchtower on 127.0.0.1:`watchtower_port`; return it once ready.

    Returns None (and logs INSTALL_HINT) when `binary` is not on PATH; raises LocalPrometheusError when it
    is but does not become ready within `ready_timeout` seconds (the process is stopped then).

    `retention` (seconds; default Prometheus' 15 days, counted back from its newest block) keeps blocks
    written for an older past; `lookback_delta` (seconds; default 5 minutes) is how long an instant
    selector sees a series after its last sample, which for backfilled samples (no staleness markers)
    must be shorter than their step."""
    exe = shutil.which(binary)
    if exe is None:
        log.warning(INSTALL_HINT)
        return None
    owns = workdir is None
    wd = Path(tempfile.mkdtemp(prefix="watchtower-prometheus-")) if workdir is None else workdir
    wd.mkdir(parents=True, exist_ok=True)
    config = wd / "prometheus.yml"
    config.write_text(
        scrape_config(
            exporter=f"127.0.0.1:{exporter_port}",
            watchtower=f"127.0.0.1:{watchtower_port}" if watchtower_port else None,
            scrape_interval=scrape_interval,
        )
    )
    listen = port or _free_port()
    url = f"http://127.0.0.1:{listen}"
    command = [
        exe,
        f"--config.file={config}",
        f"--storage.tsdb.path={wd / 'data'}",
        f"--web.listen-address=127.0.0.1:{listen}",
        "--log.level=warn",
    ]
    if retention is not None:
        command.append(f"--storage.tsdb.retention.time={duration(retention)}")
    if lookback_delta is not None:
        command.append(f"--query.lookback-delta={duration(lookback_delta)}")
    prom = LocalPrometheus(_spawn(command, wd / "prometheus.log"), url, wd, owns, tuple(command))
    _wait_ready(prom, ready_timeout)
    log.info("local Prometheus on %s (pid %d, data in %s)", url, prom.process.pid, wd)
    return prom


def _spawn(command: Sequence[str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as out:
        return subprocess.Popen(list(command), stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)


def _wait_ready(prom: LocalPrometheus, ready_timeout: float) -> None:
    """Return once `prom` answers /-/ready; stop it and raise LocalPrometheusError if it exits or is not
    ready within `ready_timeout` seconds."""
    proc = prom.process
    deadline = time.monotonic() + ready_timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = prom.log_tail()
            prom.stop()
            raise LocalPrometheusError(f"prometheus exited with status {proc.returncode}: {tail}")
        if _ready(prom.url):
            return
        time.sleep(0.2)
    tail = prom.log_tail()
    prom.stop()
    raise LocalPrometheusError(f"prometheus at {prom.url} not ready within {ready_timeout:g}s: {tail}")
