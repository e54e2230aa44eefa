"""A real Prometheus process and real exporter HTTP servers on 127.0.0.1, for the tests of this directory."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def have_prometheus() -> bool:
    return shutil.which("prometheus") is not None and shutil.which("promtool") is not None


def backfill(openmetrics_text: str, data: Path, *, week_blocks: bool = True) -> None:
    """Load an OpenMetrics text into the TSDB at `data` with promtool (Debian's, on PATH). One block a week
    unless `week_blocks` is False: seconds for a week instead of a minute of 2-hour blocks."""
    data.mkdir(parents=True, exist_ok=True)
    src = data.parent / f"{data.name}.backfill.om.txt"
    src.write_text(openmetrics_text)
    try:
        subprocess.run(
            ["promtool", "tsdb", "create-blocks-from", "openmetrics"]
            + (["--max-block-duration=168h"] if week_blocks else [])
            + [str(src), str(data)],
            check=True,
            capture_output=True,
        )
    finally:
        src.unlink()


class PrometheusProcess:
    """`prometheus` with its own config and data dir; stopped by its pid."""

    def __init__(self, *, config: str, data_dir: Path, port: int | None = None) -> None:
        self.data_dir = data_dir
        self.port = port or free_port()
        self.config_path = data_dir.parent / f"prometheus-{self.port}.yml"
        self.config_path.write_text(config)
        self.log_path = data_dir.parent / f"prometheus-{self.port}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 90.0) -> None:
        with self.log_path.open("ab") as log:
            self.proc = subprocess.Popen(
                [
                    "prometheus",
                    f"--config.file={self.config_path}",
                    f"--storage.tsdb.path={self.data_dir}",
                    "--storage.tsdb.retention.time=5y",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                    "--log.level=warn",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"prometheus exited: {self.log_path.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"prometheus not ready in {timeout}s: {self.log_path.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.proc is None:
            return
        self.proc.terminate()  # SIGTERM to this pid only
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.proc = None


class HTTPServer:
    """Serves `routes[path]()` (status, content type, body); each handler may block to play a slow server."""

    def __init__(self, routes: dict[str, Callable[[], tuple[int, str, bytes]]]) -> None:
        self.routes = routes
        self.hits: dict[str, int] = {}
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                outer.hits[path] = outer.hits.get(path, 0) + 1
                fn = outer.routes.get(path)
                if fn is None:
                    self.send_error(404)
                    return
                status, ctype, body = fn()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", ctype)
                    self.send_header("Content-Length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the client gave up (a timeout test)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> HTTPServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def metrics_route(render: Callable[[], str]) -> Callable[[], tuple[int, str, bytes]]:
    return lambda: (200, CONTENT_TYPE, render().encode())


class SimExporter:
    """The simulator's own exporter (`SimulatedCluster.serve_metrics`) on 127.0.0.1, in an event loop of its
    own thread, so that a real Prometheus scrapes it while the test thread reads Prometheus."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.server: Any = None

    @property
    def port(self) -> int:
        return int(self.server.port)

    def start(self) -> SimExporter:
        self.thread.start()
        self.server = asyncio.run_coroutine_threadsafe(
            self.sim.serve_metrics("127.0.0.1", 0), self.loop
        ).result(30)
        return self

    def stop(self) -> None:
        if self.server is not None:
            asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(30)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(30)
        self.loop.close()
