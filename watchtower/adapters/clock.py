"""The wall clock, for the `Clock` port (the simulator is the other clock: it runs faster)."""

from __future__ import annotations

import time


class SystemClock:
    def now(self) -> float:
        return time.time()
