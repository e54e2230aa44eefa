"""Durations written the way Prometheus and Alertmanager users write them: 30s, 5m, 2h, 1h30m, 7d.

Written back as text by `watchtower.domain.timefmt.format_duration`, in the same units."""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator

_UNIT = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d|w)")


def parse_duration(value: Any) -> float:
    """Return seconds for "1h30m", "90s", 90 or 90.0; raise ValueError with the accepted forms."""
    if isinstance(value, bool):
        raise ValueError("a duration such as 30s, 5m, 2h or 1h30m")
    if isinstance(value, int | float):
        if value < 0:
            raise ValueError("a duration cannot be negative")
        return float(value)
    if isinstance(value, str):
        text = value.strip()
        pos, total = 0, 0.0
        for m in _PART.finditer(text):
            if m.start() != pos:
                break
            total += float(m.group(1)) * _UNIT[m.group(2)]
            pos = m.end()
        if text and pos == len(text):
            return total
    raise ValueError(f"{value!r} is not a duration: write 30s, 5m, 2h, 1h30m or 7d")


Duration = Annotated[float, BeforeValidator(parse_duration)]


def _positive(seconds: float) -> float:
    if seconds <= 0:
        raise ValueError("must be longer than 0s")
    return seconds


# For intervals, timeouts and windows, where 0 would mean a busy loop, an instant give-up or an empty window.
PositiveDuration = Annotated[float, BeforeValidator(parse_duration), AfterValidator(_positive)]
