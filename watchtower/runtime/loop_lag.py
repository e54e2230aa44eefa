"""The event loop's lag, measured as Node's and uvloop's monitors do: a task sleeps a fixed interval and
records how late it woke. Everything on the loop (the tick, the API, the feed, the sends) waits as long as
that timer did, so a step that holds the loop shows here whatever it is."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

EVERY = 0.5  # seconds between two measurements: a stall shorter than this can be missed, so not much more


class LoopLagMonitor:
    """Measures how late the running event loop wakes a timer, every `every` seconds, and hands each lag (in
    seconds, never below 0) to `record`; `latest` and `worst` keep the last one and the largest."""

    def __init__(self, record: Callable[[float], None], *, every: float = EVERY) -> None:
        if every <= 0:
            raise ValueError(f"the lag monitor's interval must be positive, not {every}")
        self.record = record
        self.every = every
        self.latest = 0.0
        self.worst = 0.0
        self.measured = 0

    async def run(self) -> None:
        """Measure until cancelled (the serve loop cancels it with its other parts on the way out)."""
        loop = asyncio.get_running_loop()
        while True:
            due = loop.time() + self.every
            await asyncio.sleep(self.every)
            # The loop runs a timer up to its clock's resolution early: that is no lag. (uvloop's clock, the
            # service's loop when installed, counts whole milliseconds: lags read in steps of 1 ms there.)
            self.latest = max(0.0, loop.time() - due)
            self.worst = max(self.worst, self.latest)
            self.measured += 1
            self.record(self.latest)
