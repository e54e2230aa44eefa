"""Times and durations as text: RFC 3339 instants, and durations in the units people write (5m, 2h05m)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Literal, overload

# How many fractional digits an instant keeps; the rest are cut, not rounded (as `datetime.isoformat` does).
# "auto": microseconds when there are any, else none.
Precision = Literal["seconds", "milliseconds", "auto"]


@overload
def rfc3339(t: float, precision: Precision = "seconds") -> str: ...
@overload
def rfc3339(t: None, precision: Precision = "seconds") -> None: ...
@overload
def rfc3339(t: float | None, precision: Precision = "seconds") -> str | None: ...


def rfc3339(t: float | None, precision: Precision = "seconds") -> str | None:
    """Return the Unix time `t` as UTC RFC 3339 ending in Z, "2027-01-15T08:00:00Z"; None for None."""
    if t is None:
        return None
    return datetime.fromtimestamp(t, UTC).isoformat(timespec=precision).replace("+00:00", "Z")


def format_duration(seconds: float, *, spoken: bool = False) -> str:
    """Return a duration in the units people write: 300 → "5m", 5400 → "1h30m", 0 → "0s".

    Exact to the (rounded) second by default. `spoken` says it the way an alert does, cut down to what
    matters at its size: seconds under a minute, minutes under a day ("2h05m"), hours beyond ("3d4h")."""
    if seconds < 0:
        return "-" + format_duration(-seconds, spoken=spoken)
    s = int(seconds) if spoken else round(seconds)
    if spoken:
        s -= s % (1 if s < 60 else 60 if s < 86400 else 3600)
    if s == 0:
        return "0s"
    out: list[str] = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if s >= size:
            n, s = divmod(s, size)
            # Spoken minutes after hours are two digits, as on a clock: 2h05m.
            out.append(f"{n:02d}{unit}" if spoken and unit == "m" and out else f"{n}{unit}")
    return "".join(out)
