"""Watchtower — Fairness: each team's GPUs against its entitlement and its fair share, Jain's index over the
teams with demand, the idle share of allocated GPUs, and waits per team and tier, over time.

The weekly fairness report's figures at each instant: Watchtower computes them every evaluation
(domain/fairness/live.py, with the same max-min fair shares and satisfaction as the report) and exports
them as `watchtower_team_*` gauges; Jain's index, attainment and the idle shares are the shipped recording
rules (alerts/recording.py), so load the rule file. The idle threshold θ is `prometheus.idle_threshold`.
`build(settings)` returns the dashboard.
"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.panels import (
    Grid,
    dashboard,
    datasource_variable,
    instant_table,
    query_variable,
    target,
    targets,
    timeseries,
)
from watchtower.config import Settings
from watchtower.config.prometheus import PrometheusConfig
from watchtower.domain.promql.names import (
    CLUSTER_IDLE_SHARE,
    JAIN_INDEX,
    TEAM_ATTAINMENT,
    TEAM_GPUS_DEMAND,
    TEAM_GPUS_ENTITLED,
    TEAM_GPUS_FAIR_SHARE,
    TEAM_GPUS_USED,
    TEAM_IDLE_SHARE,
    TEAM_SATISFACTION,
)
from watchtower.domain.promql.own import OwnQueries

TITLE = "Watchtower — Fairness"
UID = "watchtower-fairness"
OWN = OwnQueries()
TEAM = 'team=~"$team"'
RANGE_HOURS = "$__range_s / 3600"


def build(settings: Settings) -> g.Dashboard:
    prom = settings.prometheus or PrometheusConfig(url="http://127.0.0.1:9090")  # only its defaults are read
    theta = prom.idle_threshold
    mode = settings.fairness.entitlement
    grid = Grid()

    grid.row("GPUs against entitlement")
    grid.add(
        timeseries(
            "GPUs used per team against entitlement",
            "GPUs requested by each team's running pods (DRA claims included), and the GPUs it "
            f"is entitled to (fairness.entitlement: {mode}; the series' `source` says which).",
            targets(
                (OWN.per_team(TEAM_GPUS_USED, TEAM), "{{team}} used"),
                (OWN.per_team(TEAM_GPUS_ENTITLED, TEAM), "{{team}} entitled"),
            ),
            unit="short",
        ),
        w=12,
    )
    grid.add(
        timeseries(
            "Attainment per team (used / entitled)",
            "GPUs used over GPUs entitled: 100 % is the team's entitlement, above it the team "
            "borrows what others leave. Teams entitled to none are left out.",
            [target(f"{TEAM_ATTAINMENT}{{{TEAM}}}", "{{team}}")],
            unit="percentunit",
            thresholds=[g.Threshold("red", 0, 0.0), g.Threshold("green", 1, 1.0)],
            thresholdsStyleMode="line",
        ),
        w=12,
    )
    grid.add(
        instant_table(
            "GPU-hours per team over the dashboard's range, against entitlement",
            "Mean GPUs over the range times its hours: used, entitled, demanded and the max-min fair share, "
            "as the weekly report counts them.",
            [
                (name, f"{OWN.team_mean(metric, '$__range', TEAM)} * {RANGE_HOURS}")
                for name, metric in (
                    ("GPU-hours used", TEAM_GPUS_USED),
                    ("GPU-hours entitled", TEAM_GPUS_ENTITLED),
                    ("GPU-hours demanded", TEAM_GPUS_DEMAND),
                    ("GPU-hours fair share", TEAM_GPUS_FAIR_SHARE),
                )
            ],
        ),
        w=24,
    )

    grid.row("Fair shares")
    grid.add(
        timeseries(
            "Jain's index over the teams with demand",
            "(Σx)² / (n·Σx²) of the teams' satisfaction x = min(1, used / min(demand, fair "
            "share)): 1 when every team with demand is equally served, 1/n when one team has it all. Teams "
            "with no demand take no part.",
            [target(JAIN_INDEX, "Jain's index")],
            unit="none",
            valueMin=0,
            valueMax=1,
        ),
        w=12,
    )
    grid.add(
        timeseries(
            "Satisfaction per team",
            "x = min(1, used / min(demand, fair share)), for the teams with demand.",
            [target(OWN.per_team(TEAM_SATISFACTION, TEAM), "{{team}}")],
            unit="percentunit",
            valueMin=0,
            valueMax=1,
        ),
        w=12,
    )
    grid.add(
        timeseries(
            "Demand and max-min fair share per team",
            "Demand: GPUs used plus those the team's waiting work still needs. Fair share: the "
            "max-min split of the cluster's GPUs over every team's demand.",
            targets(
                (OWN.per_team(TEAM_GPUS_DEMAND, TEAM), "{{team}} demand"),
                (OWN.per_team(TEAM_GPUS_FAIR_SHARE, TEAM), "{{team}} fair share"),
            ),
            unit="short",
        ),
        w=24,
    )

    grid.row("Idle-allocated GPUs")
    grid.add(
        timeseries(
            f"Idle share of allocated GPUs (under {theta:g} %)",
            f"Of the GPUs requested by running pods (kube-state-metrics), the share whose mean "
            f"DCGM utilisation is under {theta:g} %, per team and for the cluster.",
            targets(
                (f"{TEAM_IDLE_SHARE}{{{TEAM}}}", "{{team}}"),
                (CLUSTER_IDLE_SHARE, "cluster"),
            ),
            unit="percentunit",
            valueMin=0,
            valueMax=1,
        ),
        w=24,
    )

    grid.row("Waits per team and tier")
    grid.add(
        timeseries(
            "Longest current wait per team and tier",
            "The oldest waiting workload of each team in each tier (pending, partial gang or quota-blocked).",
            [target(OWN.team_oldest_wait("team", "tier", team="$team"), "{{team}} {{tier}}")],
            unit="s",
        ),
        w=12,
    )
    grid.add(
        timeseries(
            "Waiting GPUs per team and tier",
            "GPUs the waiting workloads of each team and tier still need.",
            [target(OWN.team_waiting_gpus("team", "tier", team="$team"), "{{team}} {{tier}}")],
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=20,
            unit="short",
        ),
        w=12,
    )

    board = dashboard(
        TITLE,
        UID,
        "Fairness between teams over time: the weekly fairness report's figures at each instant. Needs "
        "Watchtower's recording rules loaded. Generated from the Watchtower configuration: do not edit.",
        grid,
        [
            datasource_variable(),
            query_variable("team", "Team", f"label_values({TEAM_GPUS_DEMAND}, team)"),
        ],
    )
    board.time = g.Time("now-7d", "now")  # the report's week
    return board


def __getattr__(name: str) -> g.Dashboard:
    # grafanalib's generate-dashboard reads `dashboard`; built on access, not at import time.
    if name == "dashboard":
        return build(Settings())
    raise AttributeError(name)
