"""A webhook receiver for the fault tests: it keeps each POST's `webhook-id` in arrival order and runs
`on_arrival(n, id)` (n counts arrivals from 1) before it answers 204, so a test can strike a fault at the n-th
delivery or hold the receiver there."""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


class IdReceiver:
    def __init__(self, on_arrival: Callable[[int, str], None] | None = None) -> None:
        self.ids: list[str] = []
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", "0")))
                key = self.headers.get("webhook-id", "")
                with receiver.lock:
                    receiver.ids.append(key)
                    n = len(receiver.ids)
                if on_arrival is not None:
                    on_arrival(n, key)
                self.send_response(204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def received(self) -> list[str]:
        with self.lock:
            return list(self.ids)

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
