"""Watchtower — Preemption churn: who preempts whom (tier × tier, team × team), what it costs in GPU-hours,
the preemptions that did not help, which workloads are preempted again and again, how long preemptors take to run, and the disruptions that are
not preemption, kept apart.

Reads Watchtower's own `watchtower_*` metrics through domain/promql/own.py; the thrash count and window are
the configuration's (`alerting.rules.thrash_count`, `queue.thrash_window`). `build(settings)` returns the dashboard.
"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.panels import (
    DATASOURCE,
    Grid,
    bucket_heatmap,
    dashboard,
    datasource_variable,
    target,
    targets,
    timeseries,
)
from watchtower.config import Settings
from watchtower.domain.alerts.rules.base import human
from watchtower.domain.promql.own import OwnQueries

TITLE = "Watchtower — Preemption churn"
UID = "watchtower-churn"
RATE = "$__rate_interval"
OWN = OwnQueries()
HOUR = "1h"


def _matrix(title: str, description: str, expr: str, rows: str, columns: str) -> g.Table:
    """A table with one row per `rows` value and one column per `columns` value (Grafana's
    grouping-to-matrix transformation over an instant query)."""
    return g.Table(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=[g.Target(expr=expr, format="table", instant=True, refId="A", datasource=DATASOURCE)],
        transformations=[
            {
                "id": "groupingToMatrix",
                "options": {"columnField": columns, "rowField": rows, "valueField": "Value"},
            }
        ],
    )


def build(settings: Settings) -> g.Dashboard:
    thrash_count = settings.alerting.rules.thrash_count
    window = human(settings.queue.thrash_window)
    grid = Grid()

    grid.row("Who preempts whom")
    grid.add(
        _matrix(
            "Preemptions in the last hour: victim tier (rows) × preemptor tier (columns)",
            "Pods preempted by the scheduler over the last hour. A preemptor whose pod was never seen is "
            '"unknown".',
            f"{OWN.preemption_rate(HOUR, 'victim_tier', 'preemptor_tier')} * 3600",
            "victim_tier",
            "preemptor_tier",
        ),
        w=12,
    )
    grid.add(
        _matrix(
            "Preemptions in the last hour: victim team (rows) × preemptor team (columns)",
            "The same preemptions by the team of each side's namespace (its team label, else its name).",
            f"{OWN.team_preemption_rate(HOUR, 'victim_team', 'preemptor_team')} * 3600",
            "victim_team",
            "preemptor_team",
        ),
        w=12,
    )
    grid.add(
        timeseries(
            title="Preemptions per hour by victim and preemptor tier",
            description="Pods preempted per hour, one line per (victim tier, preemptor tier) pair.",
            targets=[
                target(
                    f"{OWN.preemption_rate(RATE, 'victim_tier', 'preemptor_tier')} * 3600",
                    "{{victim_tier}} by {{preemptor_tier}}",
                )
            ],
            unit="short",
        ),
        w=24,
    )

    grid.row("What it costs")
    grid.add(
        timeseries(
            title="GPU-hours lost to preemption per hour, by victim tier",
            description="GPUs × the time each victim had run when it was preempted.",
            targets=[target(f"{OWN.gpu_hours_lost_rate(RATE, 'victim_tier')} * 3600", "{{victim_tier}}")],
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=20,
            unit="short",
        ),
        w=12,
    )
    grid.add(
        _matrix(
            "GPU-hours lost in the last hour: victim team (rows) × preemptor team (columns)",
            "GPU-hours of work the victims' teams lost, by the team whose pods preempted them.",
            f"{OWN.team_gpu_hours_lost_rate(HOUR, 'victim_team', 'preemptor_team')} * 3600",
            "victim_team",
            "preemptor_team",
        ),
        w=12,
    )

    grid.row("Preemptions that did not help")
    grid.add(
        timeseries(
            title="Preemptions that did not help per hour, by preemptor tier and reason",
            description="Victims whose preemptor did not start on the node they left within "
            f"queue.preemption_outcome_window ({human(settings.queue.preemption_outcome_window)}): it started "
            "elsewhere, still waited, another pod took the room, or it was deleted. Their work was thrown away "
            "for nothing; WatchtowerPreemptionsUnhelpful fires when most of a tier's preemptions end so.",
            targets=[
                target(
                    f"{OWN.unhelpful_preemption_rate(RATE, 'preemptor_tier', 'reason')} * 3600",
                    "{{preemptor_tier}}: {{reason}}",
                )
            ],
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=20,
            unit="short",
        ),
        w=12,
    )
    grid.add(
        timeseries(
            title="GPU-hours thrown away by preemptions that did not help, per hour",
            description="GPUs × the time each victim of a preemption that did not help had run, by preemptor "
            "and victim tier.",
            targets=[
                target(
                    f"{OWN.unhelpful_gpu_hours_rate(RATE, 'preemptor_tier', 'victim_tier')} * 3600",
                    "{{victim_tier}} for {{preemptor_tier}}",
                )
            ],
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=20,
            unit="short",
        ),
        w=12,
    )

    grid.row("Thrash: workloads preempted again and again")
    grid.add(
        timeseries(
            title=f"Workloads preempted {thrash_count} or more times in {window}",
            description="Per tier: workloads whose pods were preempted at least the thrash count of times "
            "within the thrash window (a gang preempted at once counts once). Watchtower's "
            "WorkloadPreemptionThrash alert names them.",
            targets=[target(OWN.thrashing("tier"), "{{tier}}")],
            unit="short",
        ),
        w=12,
    )
    grid.add(
        timeseries(
            title=f"Most preemptions of one workload in {window}",
            description=f"Per tier, the most preemptions one workload had; the line is the thrash count "
            f"({thrash_count}) at which WatchtowerPreemptionThrash fires.",
            targets=[target(OWN.most_preemptions("tier"), "{{tier}}")],
            unit="short",
            thresholds=[g.Threshold("green", 0, 0.0), g.Threshold("red", 1, float(thrash_count))],
            thresholdsStyleMode="line",
            axisSoftMax=thrash_count + 1,
        ),
        w=12,
    )

    grid.row("Preemptors: from the victim's eviction to running")
    grid.add(
        timeseries(
            title="Preemption to running per preemptor tier: p50 and p95",
            description="From the first victim's DisruptionTarget to the preemptor's first container start: "
            "the victims' grace period, then binding and start-up. Users expect about 30 s.",
            targets=targets(
                (OWN.preemption_to_running_quantile(0.5, RATE), "{{tier}} p50"),
                (OWN.preemption_to_running_quantile(0.95, RATE), "{{tier}} p95"),
            ),
            unit="s",
            thresholds=[g.Threshold("green", 0, 0.0), g.Threshold("orange", 1, 30.0)],
            thresholdsStyleMode="line",
        ),
        w=12,
    )
    grid.add(
        bucket_heatmap(
            "Preemption to running (all tiers)",
            "How many preemptors started in each latency bucket.",
            OWN.preemptors_running_per_bucket(RATE),
        ),
        w=12,
    )

    grid.row("Other disruptions (not preemption)")
    grid.add(
        timeseries(
            title="Other disruptions per hour by reason and tier",
            description="Pods taken away by the eviction API (drains), the taint manager, pod GC or the "
            "kubelet: not preemption, and never counted with it.",
            targets=[
                target(f"{OWN.disruption_rate(RATE, 'reason', 'tier')} * 3600", "{{reason}} ({{tier}})")
            ],
            unit="short",
        ),
        w=24,
    )

    return dashboard(
        TITLE,
        UID,
        "Preemption churn as Watchtower sees it. Generated from the Watchtower configuration: do not edit.",
        grid,
        [datasource_variable()],
    )


def __getattr__(name: str) -> g.Dashboard:
    # grafanalib's generate-dashboard reads `dashboard`; built on access, not at import time.
    if name == "dashboard":
        return build(Settings())
    raise AttributeError(name)
