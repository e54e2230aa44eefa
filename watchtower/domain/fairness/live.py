"""The fairness of this moment, per team, for the gauges Grafana draws over time (the weekly report's
figures at one instant): GPUs used U, entitled E, demanded D = U + waiting, the max-min fair share F of
capacity over the demands, and satisfaction x = min(1, U / min(D, F)), with the arithmetic of shares.py.

Entitlement E in GPUs, by `fairness.entitlement`: `kueue` (each ClusterQueue's nominal GPUs, split evenly
among the teams whose LocalQueues point at it), `volcano` (each Queue's deserved GPUs, likewise), `quota`
(the team's ResourceQuota GPUs as a share of capacity), `weight` (the configured weights, 1 where not
named, as a share of capacity); `auto` takes, team by team, the first of these that names the team.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from .shares import max_min_shares, satisfaction

EntitlementMode = Literal["auto", "quota", "weight", "volcano", "kueue"]


@dataclass(frozen=True, slots=True)
class TeamNow:
    used: float
    entitled: float | None  # None: the mode gives this team nothing to go by
    demand: float
    fair_share: float
    satisfaction: float | None  # None for a team with no demand (left out of Jain's index)
    entitled_by: str = "none"  # kueue, volcano, quota, weight, none


@dataclass(frozen=True, slots=True)
class Pool:
    """GPUs promised to a group of teams together: a Kueue ClusterQueue or a Volcano Queue."""

    gpus: float
    teams: tuple[str, ...]


def entitled_gpus(
    capacity: float,
    teams: Iterable[str],
    *,
    mode: EntitlementMode,
    quotas: Mapping[str, float],
    weights: Mapping[str, float],
    kueue: Iterable[Pool] = (),
    volcano: Iterable[Pool] = (),
) -> dict[str, tuple[float, str]]:
    """Return team → (entitled GPUs, where E came from) for `teams` and every team with a quota or pool.

    A named mode applies to every team (a team it does not name gets 0). `auto` goes team by team: its
    ClusterQueues, else its Volcano Queues, else its quota share; a team none of them names gets 0 ("none"),
    unless no team has any, when all share by weight."""
    by_source = {
        "kueue": _pooled(kueue),
        "volcano": _pooled(volcano),
        "quota": _quota_shares(capacity, quotas),
    }
    names = sorted({*teams, *(t for got in by_source.values() for t in got)})
    if mode in by_source:
        got = by_source[mode]
        return {t: (got.get(t, 0.0), mode) for t in names}
    if mode == "auto" and any(by_source.values()):
        out = {}
        for t in names:
            source = next((m for m, got in by_source.items() if t in got), "none")
            out[t] = (by_source[source].get(t, 0.0) if source != "none" else 0.0, source)
        return out
    w = {t: max(0.0, weights.get(t, 1.0)) for t in names}
    total = sum(w.values())
    return {t: (capacity * v / total if total > 0 else 0.0, "weight") for t, v in w.items()}


def _pooled(pools: Iterable[Pool]) -> dict[str, float]:
    out: dict[str, float] = {}
    for p in pools:
        if p.teams and p.gpus > 0:
            for t in p.teams:
                out[t] = out.get(t, 0.0) + p.gpus / len(p.teams)
    return out


def _quota_shares(capacity: float, quotas: Mapping[str, float]) -> dict[str, float]:
    total = sum(v for v in quotas.values() if v > 0)
    return {t: capacity * v / total for t, v in quotas.items() if v > 0} if total > 0 else {}


def fairness_now(
    capacity: float,
    used: Mapping[str, float],
    waiting: Mapping[str, float],
    entitled: Mapping[str, tuple[float, str]],
    *,
    weights: Mapping[str, float] | None = None,
) -> dict[str, TeamNow]:
    """Return each team's figures now: every team that uses, waits for or is entitled to GPUs."""
    teams = sorted({*used, *waiting, *entitled})
    demand = {t: used.get(t, 0.0) + waiting.get(t, 0.0) for t in teams}
    fair = max_min_shares(capacity, demand, weights)
    return {
        t: TeamNow(
            used=used.get(t, 0.0),
            entitled=entitled[t][0] if t in entitled else None,
            entitled_by=entitled[t][1] if t in entitled else "none",
            demand=demand[t],
            fair_share=fair[t],
            satisfaction=satisfaction(used.get(t, 0.0), demand[t], fair[t]),
        )
        for t in teams
    }
