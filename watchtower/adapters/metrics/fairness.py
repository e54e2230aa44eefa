"""The fairness gauges of one evaluation: per (team, tier) the waiting GPUs and oldest waits, per team the
used, demanded, fair-share and entitled GPUs and the satisfaction (Jain's index is computed from these)."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client.core import GaugeMetricFamily, Metric

from watchtower.domain.fairness.live import TeamNow
from watchtower.domain.promql.names import (
    TEAM_GPUS_DEMAND,
    TEAM_GPUS_ENTITLED,
    TEAM_GPUS_FAIR_SHARE,
    TEAM_GPUS_USED,
    TEAM_OLDEST_WAIT,
    TEAM_SATISFACTION,
    WAITING_GPUS,
)
from watchtower.ports import QueueGauges


def fairness_families(g: QueueGauges) -> Iterable[Metric]:
    """The fairness gauges of one evaluation: per (team, tier) waits, per team the shares."""
    for name, doc, values in (
        (WAITING_GPUS, "GPUs waiting workloads still need, by team and tier.", g.waiting_gpus),
        (
            TEAM_OLDEST_WAIT,
            "Longest current wait of a waiting workload, by team and tier.",
            g.team_oldest_wait,
        ),
    ):
        family = GaugeMetricFamily(name, doc, labels=["team", "tier"])
        for (team, tier), v in sorted(values.items()):
            family.add_metric([team, tier], v)
        yield family
    teams = sorted(g.teams.items())
    per_team: list[tuple[str, str, Callable[[TeamNow], float | None]]] = [
        (
            TEAM_GPUS_USED,
            "GPUs requested by the team's running pods (DRA claims included).",
            lambda t: t.used,
        ),
        (TEAM_GPUS_DEMAND, "GPUs the team uses plus those its waiting work still needs.", lambda t: t.demand),
        (
            TEAM_GPUS_FAIR_SHARE,
            "The team's max-min fair share of the cluster's GPUs over every team's demand.",
            lambda t: t.fair_share,
        ),
        (
            TEAM_SATISFACTION,
            "min(1, used / min(demand, fair share)); only teams with demand (Jain's index is over them).",
            lambda t: t.satisfaction,
        ),
    ]
    for name, doc, value in per_team:
        family = GaugeMetricFamily(name, doc, labels=["team"])
        for team, t in teams:
            x = value(t)
            if x is not None:
                family.add_metric([team], x)
        yield family
    entitled = GaugeMetricFamily(
        TEAM_GPUS_ENTITLED,
        "GPUs the team is entitled to, by where the entitlement comes from (fairness.entitlement).",
        labels=["team", "source"],
    )
    for team, t in teams:
        if t.entitled is not None:
            entitled.add_metric([team, t.entitled_by], t.entitled)
    yield entitled
