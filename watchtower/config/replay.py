"""`replay:`: the service's policy replays (`POST /api/v1/replays`), the weeks recorded for them and the
policies the weekly report replays as "What if" (docs/replay.md)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

from .what_if import WhatIfConfig


class ReplayConfig(BaseModel):
    """Policy replays: the service's pool, its limits, the recorded weeks kept, the weekly report's What if."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    workers: int = Field(1, ge=1, le=64)
    """Policy replays the service runs at once (`POST /api/v1/replays`), each off the event loop; the others wait their turn."""
    max_rows: int = Field(100_000, ge=1, le=1_000_000)
    """Trace rows a replay request may carry; a larger trace is refused (413) with the rows counted and the time estimated."""
    max_policies: int = Field(4, ge=1, le=16)
    """Policies one replay request may compare."""
    keep: int = Field(20, ge=1, le=1000)
    """Replays the service keeps (in memory, lost at a restart): beyond it the oldest finished one is dropped."""
    retention_weeks: int = Field(8, ge=1, le=520)
    """Weeks of replay records (each GPU workload and node, for `watchtower replay --week`) kept in the store; needs `fairness.enabled`."""
    what_if: list[WhatIfConfig] = Field(default_factory=list, max_length=8)
    """Policies the weekly fairness report replays its week's recorded jobs under, each shown beside what was observed in the report's "What if" section (docs/fairness.md); empty: no such section."""

    @field_validator("what_if")
    @classmethod
    def _distinct_names(cls, v: list[WhatIfConfig]) -> list[WhatIfConfig]:
        seen: set[str] = set()
        for p in v:
            if p.name in seen:
                raise ValueError(f"two policies are named {p.name!r}: give each its own name")
            seen.add(p.name)
        return v
