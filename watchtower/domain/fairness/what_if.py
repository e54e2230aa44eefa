"""The weekly report's "What if" section as one value: the week's recorded jobs replayed under each policy
named in `replay.what_if`, beside what was observed and beside the running configuration replayed (the
fidelity line: how closely the replay reproduces the week, so a policy's change can be read against it).

Figures that could not be computed are None. Waits are seconds; attainment is Σ GPUs·run / Σ GPUs·(run +
wait) over a team's jobs, as the replay's own figures (docs/replay.md).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Literal

RunKind = Literal["observed", "configured", "policy"]


@dataclass(frozen=True, slots=True)
class WhatIfRun:
    """One column of the section: what was observed, the configuration replayed, or a named policy."""

    name: str
    kind: RunKind
    jobs: int  # observed: the jobs that started within the record; a replay: every recorded job
    preemptions: int | None  # None for the observed run (the record says when, not what a replay counts)
    gpu_hours_lost: float | None
    jain: float | None  # Jain's index over the teams' attainment


@dataclass(frozen=True, slots=True)
class TierFigures:
    run: str
    jobs: int
    p50: float | None
    p95: float | None


@dataclass(frozen=True, slots=True)
class WhatIfTier:
    tier: str
    runs: tuple[TierFigures, ...]  # in the section's run order; a run without this tier has none


@dataclass(frozen=True, slots=True)
class TeamFigures:
    run: str
    jobs: int
    wait_mean: float | None
    attainment: float | None
    wait_change: float | None  # against the configuration replayed; None for it and for the observed run
    attainment_change: float | None


@dataclass(frozen=True, slots=True)
class WhatIfTeam:
    team: str
    runs: tuple[TeamFigures, ...]


@dataclass(frozen=True, slots=True)
class WhatIfFailure:
    """A replay that could not run: which policy (or the configuration itself) and why, in words."""

    policy: str
    why: str


@dataclass(frozen=True, slots=True)
class WhatIf:
    runs: tuple[WhatIfRun, ...] = ()
    tiers: tuple[WhatIfTier, ...] = ()
    teams: tuple[WhatIfTeam, ...] = ()
    failures: tuple[WhatIfFailure, ...] = ()
    empty: str | None = None  # one line saying why there is nothing to compare (no jobs recorded)
    policies: tuple[str, ...] = field(default=())  # the configured policies' names, failed ones included

    def for_teams(self, teams: Iterable[str]) -> WhatIf:
        """Return the section with only `teams`' lines (the tiers are the cluster's, as the report's are)."""
        keep = set(teams)
        return replace(self, teams=tuple(t for t in self.teams if t.team in keep))
