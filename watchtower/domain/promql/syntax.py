"""The PromQL text every query builder shares: durations, the window rule, braces, aggregation, a named query.

Only legacy metric/label names, no `holt_winters`: the same text runs on Prometheus 2 and 3. Prometheus 3
ranges are left-open: every window is at least 4× the scrape interval (`check_window`).
"""

from __future__ import annotations

from dataclasses import dataclass

# Prometheus 3 drops the sample at the left edge of a range: with fewer than 4 scrapes per window a single
# missed scrape empties the range.
MIN_SCRAPES_PER_WINDOW = 4


def duration(seconds: float) -> str:
    """Return a PromQL duration for `seconds`: 1800 → "30m", 604800 → "1w", 1.5 → "1500ms"."""
    if seconds <= 0:
        raise ValueError(f"a PromQL duration must be positive, got {seconds!r}")
    ms = round(seconds * 1000)
    for unit, size in (("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def check_window(window: float, scrape_interval: float) -> None:
    """Raise ValueError unless `window` spans at least 4 scrapes (left-open ranges in Prometheus 3)."""
    if window < MIN_SCRAPES_PER_WINDOW * scrape_interval:
        raise ValueError(
            f"window {duration(window)} is shorter than {MIN_SCRAPES_PER_WINDOW} × the scrape interval "
            f"{duration(scrape_interval)}: one missed scrape would empty it"
        )


def quoted(value: str) -> str:
    """Return `value` as a PromQL double-quoted string: `a"b` → `"a\\"b"`. Every label value (and `=~`
    pattern) a query is built from goes through here, so a quote, a backslash or a newline in a tier, a
    team or a resource name stays inside its string instead of ending the selector."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def braces(*parts: str) -> str:
    """Return the selector `{a,b}` of the non-empty `parts` (`{}` when all are empty)."""
    return "{" + ",".join(p for p in parts if p) + "}"


def aggregate(op: str, by: tuple[str, ...], expr: str) -> str:
    """Return `op by (by) (expr)`, or `op(expr)` when `by` is empty."""
    return f"{op} by ({', '.join(by)}) ({expr})" if by else f"{op}({expr})"


@dataclass(frozen=True, slots=True)
class NamedQuery:
    """One expression of a catalogue: its name, its builder's first docstring line, its text."""

    name: str
    doc: str
    expr: str
