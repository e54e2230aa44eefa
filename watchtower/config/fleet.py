"""The other clusters' Watchtowers this replica's fleet page (`/fleet`) reads, and how long it waits for them."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from .durations import PositiveDuration


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
        scheme, sep, rest = v.partition("://")
        if not sep or scheme.lower() not in ("http", "https") or not rest.strip("/") or not v.isprintable():
            raise ValueError(
                f"not an http(s) URL of a Watchtower: {v!r} (e.g. https://watchtower.prod-eu.example)"
            )
        return v.rstrip("/")


class FleetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    clusters: list[FleetCluster] = []
    """The other clusters' Watchtowers, shown with this one on `/fleet`; empty: the page shows this cluster alone and the status page does not link to it."""
    timeout: PositiveDuration = 2.0
    """How long the fleet page waits for each cluster's answers; a cluster that does not answer in time is named as missing."""

    @model_validator(mode="after")
    def _distinct(self) -> FleetConfig:
        names = [c.name for c in self.clusters]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise ValueError(f"fleet.clusters names a cluster twice: {', '.join(twice)}")
        return self
