"""ISO weeks in a configured timezone: the report's unit of time."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta, tzinfo

_WEEK = re.compile(r"^(\d{4})-W(\d{2})$")


@dataclass(frozen=True, slots=True, order=True)
class IsoWeek:
    year: int
    week: int

    @classmethod
    def parse(cls, text: str) -> IsoWeek:
        """Read `2026-W47`; raise ValueError naming the expected form for anything else."""
        m = _WEEK.match(text.strip())
        if not m:
            raise ValueError(f"not an ISO week (expected YYYY-Www, e.g. 2026-W47): {text!r}")
        year, week = int(m.group(1)), int(m.group(2))
        try:
            date.fromisocalendar(year, week, 1)
        except ValueError:
            raise ValueError(f"{year} has no ISO week {week}: {text!r}") from None
        return cls(year, week)

    @classmethod
    def containing(cls, when: float, tz: tzinfo) -> IsoWeek:
        """Return the ISO week that the instant `when` (Unix seconds) falls in, in `tz`."""
        y, w, _ = datetime.fromtimestamp(when, tz).isocalendar()
        return cls(y, w)

    def __str__(self) -> str:
        return f"{self.year}-W{self.week:02d}"

    def bounds(self, tz: tzinfo) -> tuple[float, float]:
        """Return [start, end) in Unix seconds: Monday 00:00 to the next Monday 00:00 in `tz`. A week with a
        daylight-saving change is 167 or 169 hours long, as the wall clock says."""
        monday = date.fromisocalendar(self.year, self.week, 1)
        start = datetime(monday.year, monday.month, monday.day, tzinfo=tz)
        nxt = monday + timedelta(days=7)
        end = datetime(nxt.year, nxt.month, nxt.day, tzinfo=tz)
        return start.timestamp(), end.timestamp()

    def previous(self, n: int = 1) -> IsoWeek:
        d = date.fromisocalendar(self.year, self.week, 1) - timedelta(weeks=n)
        y, w, _ = d.isocalendar()
        return IsoWeek(y, w)
