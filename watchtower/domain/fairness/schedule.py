"""When the weekly report is sent: the latest scheduled send time before a moment, and whether a start is
still within the misfire grace after it. Pure arithmetic on the schedule's day, time and timezone."""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Protocol
from zoneinfo import ZoneInfo

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class WeeklySchedule(Protocol):
    """A send on `schedule_day` at `schedule_time` (HH:MM) in `timezone`, late by at most `misfire_grace` s."""

    @property
    def schedule_day(self) -> str: ...
    @property
    def schedule_time(self) -> str: ...
    @property
    def timezone(self) -> str: ...
    @property
    def misfire_grace(self) -> float: ...


def send_hour_minute(schedule: WeeklySchedule) -> tuple[int, int]:
    """Return the hour and minute of the send, in the schedule's timezone."""
    hh, mm = schedule.schedule_time.split(":")
    return int(hh), int(mm)


def last_fire_time(schedule: WeeklySchedule, now: float) -> datetime:
    """Return the latest scheduled send time (`schedule_day` at `schedule_time`, in `timezone`) at or before
    `now`."""
    tz = ZoneInfo(schedule.timezone)
    local = datetime.fromtimestamp(now, tz)
    hh, mm = send_hour_minute(schedule)
    day = WEEKDAYS.index(schedule.schedule_day)
    for back in range(8):
        d = local.date() - timedelta(days=back)
        at = datetime(d.year, d.month, d.day, hh, mm, tzinfo=tz)
        if d.weekday() == day and at <= local:
            return at
    raise AssertionError("a weekday recurs within 8 days")


def within_grace(schedule: WeeklySchedule, now: float) -> bool:
    """Return whether `now` is within the misfire grace after the latest scheduled send: a send tried then
    still counts as that week's."""
    return now - last_fire_time(schedule, now).timestamp() <= schedule.misfire_grace
