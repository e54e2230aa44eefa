"""A controller stand-in's loop: one pass every `interval` seconds on a daemon thread, until stopped.

The kubelet and paddle-operator stand-ins differ only in their pass and in which errors are a restarting
API server (retried quietly) rather than a fault the scenario should see in `errors`.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger(__name__)


class StandIn:
    name = "stand-in"
    interval = 0.5

    def __init__(self) -> None:
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10)

    def run_once(self) -> None:
        raise NotImplementedError

    def passing(self, e: Exception) -> bool:
        """Return True for an error the next pass gets past (the API server restarting, a conflict)."""
        return False

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception as e:  # keep it alive; the scenarios' own waits report what is missing
                if not self.passing(e):
                    self.errors.append(repr(e))
                    log.warning("%s: %r", self.name, e)
            self._stop.wait(self.interval)
