"""Watchtower — Queue: what waits, how long against its tier's thresholds, what was preempted, what quota holds.

Reads Watchtower's own `watchtower_*` metrics; thresholds are drawn from the tier policy of the configuration.
`build(settings)` returns the dashboard; grafanalib's `generate-dashboard` reads the module's `dashboard`
attribute, built on first access from the default configuration.
"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.panels import (
    DATASOURCE,
    Grid,
    bucket_heatmap,
    dashboard,
    datasource_variable,
    query_variable,
    target,
    targets,
    timeseries,
    wait_thresholds,
)
from watchtower.config import Settings
from watchtower.domain.promql.names import PENDING_WORKLOADS, TIME_TO_SCHEDULE_P50, TIME_TO_SCHEDULE_P95
from watchtower.domain.promql.own import OwnQueries

TITLE = "Watchtower — Queue"
UID = "watchtower-queue"
RATE = "$__rate_interval"
OWN = OwnQueries()
IN_NAMESPACE = OwnQueries('namespace=~"$namespace"')  # the dashboard's namespace variable


def build(settings: Settings) -> g.Dashboard:
    tiers = settings.tier_policy().tiers
    grid = Grid()

    grid.row("Waiting work")
    grid.add(
        timeseries(
            title="Pending workloads per tier",
            description="Workloads waiting (pending, partial gang or quota-blocked), by tier.",
            targets=[target(IN_NAMESPACE.pending("tier"), "{{tier}}")],
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=20,
            unit="short",
        ),
        w=12,
    )
    grid.add(
        g.Table(
            title="Pending workloads by namespace, tier and reason",
            description="The main reason most nodes gave the scheduler, per namespace and tier.",
            dataSource=DATASOURCE,
            targets=[
                g.Target(
                    expr=f"{IN_NAMESPACE.pending('namespace', 'tier', 'reason')} > 0",
                    format="table",
                    instant=True,
                    refId="A",
                    datasource=DATASOURCE,
                )
            ],
            transformations=[{"id": "organize", "options": {"excludeByName": {"Time": True}}}],
        ),
        w=12,
    )
    for t in tiers:
        grid.add(
            timeseries(
                title=f"Oldest wait: {t.name} tier",
                description=f"Longest current wait in the {t.name} tier; lines at warn_after "
                f"({t.warn_after:g} s) and critical_after ({t.critical_after:g} s) of the tier policy.",
                targets=[
                    target(OWN.oldest_wait(tier=t.name), "oldest wait"),
                ],
                unit="s",
                thresholds=wait_thresholds(t.warn_after, t.critical_after),
                thresholdsStyleMode="line",
                axisSoftMax=round(t.critical_after * 1.2),  # the critical line stays in view
            ),
            w=24 // min(len(tiers), 4),
            h=7,
        )

    grid.row("Time to schedule")
    grid.add(
        bucket_heatmap(
            "Time to schedule (all tiers)",
            "Creation to binding of GPU pods: how many were scheduled in each wait bucket.",
            OWN.scheduled_per_bucket(RATE),
            filterValues={"le": 1e-9},
        ),
        w=12,
    )
    grid.add(
        timeseries(
            title="Time to schedule per tier: p50 and p95",
            description="Percentiles of creation to binding from the histogram (buckets up to 48 h, the tier "
            "thresholds among their bounds), by the recording rules shipped in "
            "alerts/generated/watchtower-rules.yaml: load them into this Prometheus.",
            targets=targets(
                (TIME_TO_SCHEDULE_P50, "{{tier}} p50"),
                (TIME_TO_SCHEDULE_P95, "{{tier}} p95"),
            ),
            unit="s",
            scaleDistributionType="log",
            scaleDistributionLog=2,
        ),
        w=12,
    )

    grid.row("Preemption and gangs")
    grid.add(
        timeseries(
            title="Preemptions by victim tier",
            description="Pods preempted by the scheduler per hour, by the tier of the victim and of the preemptor.",
            targets=[
                target(
                    f"{OWN.preemption_rate(RATE, 'victim_tier', 'preemptor_tier')} * 3600",
                    "{{victim_tier}} by {{preemptor_tier}}",
                )
            ],
            unit="short",
        ),
        w=8,
    )
    grid.add(
        timeseries(
            title="GPU-hours lost to preemption by victim tier",
            description="GPUs × time the victims had run, lost per hour.",
            targets=[target(f"{OWN.gpu_hours_lost_rate(RATE, 'victim_tier')} * 3600", "{{victim_tier}}")],
            unit="short",
        ),
        w=8,
    )
    grid.add(
        timeseries(
            title="Partial gangs and the GPUs they hold",
            description="Gangs with some pods bound and some waiting: their bound pods hold GPUs that do no work.",
            targets=targets(
                (OWN.partial_gangs("tier"), "{{tier}} gangs"),
                (OWN.partial_gang_gpus_held("tier"), "{{tier}} GPUs held"),
            ),
            unit="short",
        ),
        w=8,
    )

    grid.row("Quota")
    grid.add(
        g.BarGauge(
            title="GPU quota use per namespace",
            description="requests.nvidia.com/gpu used as a share of the ResourceQuota's hard limit.",
            dataSource=DATASOURCE,
            targets=[target(IN_NAMESPACE.quota_use("namespace"), "{{namespace}}", instant=True)],
            format="percentunit",
            min=0,
            max=1,
            orientation="horizontal",
            thresholds=[
                g.Threshold("green", 0, 0.0),
                g.Threshold("orange", 1, 0.8),
                g.Threshold("red", 2, 1.0),
            ],
        ),
        w=24,
        h=10,
    )

    grid.row("Watchtower itself")
    grid.add(
        timeseries(
            title="Event-loop lag per replica: latest and p99",
            description="How late each replica's event loop woke a timer it set every 0.5 s. The tick, the "
            "API and the cluster feed share that loop: seconds here mean one step holds it and every "
            "other waits behind it. p99 is over every wake-up, so a stall between two scrapes shows too.",
            targets=targets(
                (OWN.loop_lag("instance"), "{{instance}} latest"),
                (OWN.loop_lag_quantile(0.99, RATE, "instance"), "{{instance}} p99"),
            ),
            unit="s",
            valueMin=0,
        ),
        w=24,
    )

    return dashboard(
        TITLE,
        UID,
        "The GPU queue as Watchtower sees it. Generated from the Watchtower configuration: do not edit.",
        grid,
        [
            datasource_variable(),
            query_variable("namespace", "Namespace", f"label_values({PENDING_WORKLOADS}, namespace)"),
        ],
    )


def __getattr__(name: str) -> g.Dashboard:
    # grafanalib's generate-dashboard reads `dashboard`; built on access, not at import time.
    if name == "dashboard":
        return build(Settings())
    raise AttributeError(name)
