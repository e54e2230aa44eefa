"""The `fairness:` section: the weekly report's week, schedule, recipients, entitlement and thresholds."""

from __future__ import annotations

import re
import zoneinfo
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .durations import PositiveDuration

_EMAIL = re.compile(r"^[^@\s<>,;\"']+@[^@\s<>,;\"']+$")


def email_addresses(v: list[str]) -> list[str]:
    """Return `v`; ValueError naming the first entry that is not one plain email address."""
    for a in v:
        if not _EMAIL.match(a):
            raise ValueError(f"not an email address: {a!r}")
    return v


class FairnessConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    enabled: bool = True
    """Record wait, preemption and incident history and offer the weekly report (page, API, CLI)."""
    timezone: str = "UTC"
    """IANA timezone the ISO weeks and the schedule are read in (e.g. `Europe/Berlin`)."""
    send: bool = False
    """Email the report every week on `schedule_*` (needs an email receiver's SMTP settings, `alerting.receivers`)."""
    schedule_day: Literal["mon", "tue", "wed", "thu", "fri", "sat", "sun"] = "mon"
    """Weekday the previous ISO week's report is sent."""
    schedule_time: str = Field("09:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    """Time of day (HH:MM, in `timezone`) the report is sent."""
    misfire_grace: PositiveDuration = 86400.0
    """A send missed while the service was down still happens if it starts within this long; once per week."""
    smtp_receiver: str = ""
    """Name of the email receiver in `alerting.receivers` whose SMTP settings send the report; empty: the first email receiver."""
    platform_recipients: list[str] = []
    """Addresses that get the cluster summary."""
    team_recipients: dict[str, list[str]] = {}
    """Team name → addresses that get that team's report."""
    recipients_annotation: str = "watchtower.io/report-to"
    """Namespace annotation with comma-separated addresses for the team's report, used when `team_recipients` has no entry for the team."""
    entitlement: Literal["auto", "quota", "weight", "volcano", "kueue"] = "auto"
    """How a team's entitlement E is found: `quota` (its ResourceQuota GPUs as a share of capacity), `weight` (`weights`), `volcano` (its Queue's deserved GPUs), `kueue` (its ClusterQueue's nominal GPU quota); `auto` takes, team by team, the first of Kueue, Volcano and quota that names the team (0 for a team none names), the configured weights (1 where not named) when none names any team; Grafana's live gauges use the same rule."""
    weights: dict[str, float] = {}
    """Team name → weight, for `entitlement: weight` (teams not named weigh 1)."""
    step: PositiveDuration = 300.0
    """Resolution of the GPU-hours integrals taken from Prometheus, and the interval of the generated fairness usage recording rules (`watchtower.fairness.usage.rules`)."""
    long_running_after: PositiveDuration = 259200.0
    """Workloads running longer than this are listed (72 h)."""
    top_waiting: int = Field(10, ge=0, le=100)
    """How many of a team's longest waits are listed."""
    retention_weeks: int = Field(10, ge=2, le=520)
    """Weeks of wait, preemption and incident history kept in the store (the 8-week trend needs at least 9)."""

    @field_validator("timezone")
    @classmethod
    def _tz(cls, v: str) -> str:
        try:
            zoneinfo.ZoneInfo(v)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown IANA timezone: {v!r}") from None
        return v

    @field_validator("platform_recipients")
    @classmethod
    def _addresses(cls, v: list[str]) -> list[str]:
        return email_addresses(v)

    @field_validator("team_recipients")
    @classmethod
    def _team_addresses(cls, v: dict[str, list[str]]) -> dict[str, list[str]]:
        for team, addrs in v.items():
            for a in addrs:
                if not _EMAIL.match(a):
                    raise ValueError(f"team {team!r}: not an email address: {a!r}")
        return v
