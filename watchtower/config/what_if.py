"""`replay.what_if`: the policies the weekly fairness report replays its week under (docs/replay.md).

Only the shape is here; each policy is checked against the replay's policy model when the configuration
is loaded (config/loading.py), which reads this package's model itself.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class WhatIfConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    """A policy the weekly fairness report replays its week under, shown as "what if" (docs/replay.md)."""

    name: str = Field(min_length=1, max_length=80)
    """What the report calls this policy's replay (one line of printable characters)."""
    policy: str | dict[str, Any] = Field(default_factory=dict)
    """The policy: a YAML or JSON file (a relative path is read from the configuration file's directory, when the configuration is loaded) or its keys written here, as `watchtower replay --policy` reads one (docs/replay.md, "The policy"); every key optional: the tiers fall back to this configuration's `tiers`, the nodes to the node inventory recorded for the week."""

    @field_validator("name")
    @classmethod
    def _one_line(cls, v: str) -> str:
        if v != v.strip() or not v.isprintable():
            raise ValueError(
                f"{v!r} must be one line of printable characters with no leading or trailing space"
            )
        if v in WHAT_IF_RESERVED:
            raise ValueError(f"{v!r} names one of the report's own runs; choose another name")
        return v


# The what-if section's own runs: what was observed and the running configuration replayed.
WHAT_IF_RESERVED = ("observed", "as configured")
