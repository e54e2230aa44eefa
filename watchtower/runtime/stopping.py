"""SIGTERM and SIGINT, handled on the event loop: the first asks for an orderly stop, a second for a quick
one."""

from __future__ import annotations

import asyncio
import logging
import signal
from typing import Any

log = logging.getLogger("watchtower")


class Stopping:
    """SIGTERM and SIGINT, handled on the loop: the first asks for an orderly stop, a second for a quick one."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.hurry = asyncio.Event()
        self._before: dict[int, Any] = {}

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.SIGNALS:
            self._before[sig] = signal.getsignal(sig)
            loop.add_signal_handler(sig, self._on_signal, sig)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig, before in self._before.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, before)  # whatever the CLI had set (SIGTERM as Ctrl-C) for what follows
        self._before.clear()

    def _on_signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if self.requested.is_set():
            log.warning("%s again: stopping without waiting for notifications under way", name)
            self.hurry.set()
        else:
            log.info("%s: stopping", name)
            self.requested.set()
