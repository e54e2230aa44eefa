"""The other clusters' Watchtowers this replica's fleet page (`/fleet`) reads, how long it waits for them, and
the fleet fairness report's weekly send (`fleet.report`)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .durations import PositiveDuration
from .fairness import email_addresses
from .urls import http_url


class FleetCluster(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str = Field(min_length=1, max_length=253)
    """The cluster's name on the fleet page (as its Watchtower's `cluster.name`)."""
    url: str
    """Its Watchtower's address, `https://watchtower.prod-eu.example`: its JSON API is read there, and its row links to it."""
    token_file: str | None = None
    """A file holding a bearer token sent to it (a proxy in front of it may ask for one); read at each visit, so a rotated token is picked up."""

    @field_validator("name")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if v != v.strip() or not v.isprintable():
            raise ValueError(f"fleet cluster name {v!r} must be one line of printable characters")
        return v

    @field_validator("url")
    @classmethod
    def _absolute(cls, v: str) -> str:
        return http_url(v, "a Watchtower", "https://watchtower.prod-eu.example").rstrip("/")


class FleetReportConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    send: bool = False
    """Email the fleet fairness report of the last complete week, with the weekly report (`fairness.send`: its schedule, its SMTP receiver, once per ISO week per address), over `fleet.clusters` and this cluster."""
    prometheus: str = ""
    """The global metrics engine holding every cluster's series under `cluster.label` (as `watchtower report fairness --fleet --prometheus`); required with `send`."""
    recipients: list[str] = []
    """Addresses that get the fleet report; required with `send`."""

    @field_validator("prometheus")
    @classmethod
    def _engine(cls, v: str) -> str:
        return http_url(v, "a metrics engine", "https://thanos.example") if v else v

    @field_validator("recipients")
    @classmethod
    def _addresses(cls, v: list[str]) -> list[str]:
        return email_addresses(v)

    @model_validator(mode="after")
    def _complete(self) -> FleetReportConfig:
        if self.send and not self.prometheus:
            raise ValueError(
                "fleet.report.send needs fleet.report.prometheus: the global metrics engine's URL"
            )
        if self.send and not self.recipients:
            raise ValueError("fleet.report.send needs fleet.report.recipients: the addresses to send it to")
        return self


class FleetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    clusters: list[FleetCluster] = []
    """The other clusters' Watchtowers, shown with this one on `/fleet`; empty: the page shows this cluster alone and the status page does not link to it."""
    timeout: PositiveDuration = 2.0
    """How long the fleet page waits for each cluster's answers; a cluster that does not answer in time is named as missing."""
    report: FleetReportConfig = FleetReportConfig()
    """The fleet fairness report's weekly email."""

    @model_validator(mode="after")
    def _distinct(self) -> FleetConfig:
        names = [c.name for c in self.clusters]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"fleet.clusters names a cluster twice: {', '.join(twice)}")
        if self.report.send and not self.clusters:
            raise ValueError("fleet.report.send needs fleet.clusters: the clusters the fleet report covers")
        return self
