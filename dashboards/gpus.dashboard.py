"""Watchtower — GPUs: allocation against utilisation per team, idle-allocated GPUs, MIG slices.

Every query is one of domain/promql/exporters.py's, the expressions the service itself runs, built from the
configuration's `prometheus:` section (label spellings, selectors, idle threshold) and narrowed by the
dashboard's variables. The namespace variable narrows the raw kube-state-metrics and DCGM series by their
`namespace` label, so it needs them scraped with `honor_labels: true` (the recommended set-up); "All" keeps
every spelling. `build(settings)` returns the dashboard.
"""

from __future__ import annotations

from grafanalib import core as g

from dashboards.panels import (
    DATASOURCE,
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
from watchtower.domain.promql.exporters import ExporterQueries, QueryConfig
from watchtower.domain.promql.names import MIG_PROFILE

TITLE = "Watchtower — GPUs"
UID = "watchtower-gpus"
NS = 'namespace=~"$namespace"'


def _queries(settings: Settings) -> tuple[ExporterQueries, PrometheusConfig]:
    prom = settings.prometheus or PrometheusConfig(url="http://127.0.0.1:9090")  # only its defaults are read
    base = prom.query_config(team_label=settings.teams.label)
    narrowed = QueryConfig(
        labels=base.labels,
        dcgm_selector=",".join(s for s in (base.dcgm_selector, NS) if s),
        ksm_selector=",".join(s for s in (base.ksm_selector, NS) if s),
        team_label=base.team_label,
        ksm_bridge=base.ksm_bridge,
    )
    return ExporterQueries(narrowed), prom


def _team_label(q: ExporterQueries) -> str:
    return "label_" + "".join(c if c.isalnum() else "_" for c in q.config.team_label)


def _teams_selected(q: ExporterQueries) -> str:
    """Return the set of teams the team variable selects, as one series per team (label `team`): a namespace's
    team label, else the namespace name, as in ExporterQueries.namespace_team."""
    lbl = _team_label(q)
    ksm = q.config.ksm_selector
    named = f'label_replace(kube_namespace_labels{{{ksm},{lbl}=~"$team"}}, "team", "$1", "{lbl}", "(.*)")'
    unnamed = f'label_replace(kube_namespace_labels{{{ksm},{lbl}="",namespace=~"$team"}}, "team", "$1", "namespace", "(.*)")'
    return f"group by (team) ({named} or {unnamed})"


def build(settings: Settings) -> g.Dashboard:
    q, prom = _queries(settings)
    teams = _teams_selected(q)
    step = max(4 * prom.scrape_interval, 300.0)  # averaging window of the "now" figures: ≥ 4 scrapes
    threshold = prom.idle_threshold
    grid = Grid()

    def per_team(expr: str) -> str:
        return f"({expr}) and on (team) {teams}"

    grid.row("Allocation and utilisation per team")
    grid.add(
        timeseries(
            title="GPUs allocated per team",
            description="GPUs requested by running pods (kube-state-metrics), per team.",
            targets=[target(per_team(q.team_gpus_allocated()), "{{team}}")],
            stacking={"mode": "normal", "group": "A"},
            fillOpacity=20,
            unit="short",
        ),
        w=12,
    )
    grid.add(
        timeseries(
            title="GPU utilisation per team",
            description=f"Mean utilisation of the devices each team's pods use, over {step:g} s (DCGM; MIG "
            "slices by their graphics-engine ratio).",
            targets=[target(per_team(q.team_utilisation_avg(step)), "{{team}}")],
            unit="percent",
            valueMin=0,
            valueMax=100,
            thresholds=[g.Threshold("red", 0, 0.0), g.Threshold("green", 1, threshold)],
            thresholdsStyleMode="line",
        ),
        w=12,
    )
    grid.add(
        instant_table(
            "Allocation against utilisation per team",
            "Now: GPUs allocated, mean utilisation and idle GPUs (under the idle threshold).",
            [
                ("GPUs allocated", per_team(q.team_gpus_allocated())),
                ("utilisation %", per_team(q.team_utilisation_avg(step))),
                ("GPUs idle", per_team(q.team_idle_devices(step, threshold, kind="gpu"))),
            ],
        ),
        w=24,
    )

    grid.row("Idle-allocated GPUs")
    grid.add(
        timeseries(
            title=f"Idle GPUs per team (under {threshold:g} %)",
            description=f"Whole GPUs held by running pods with mean utilisation under {threshold:g} % over "
            f"{step:g} s.",
            targets=[target(per_team(q.team_idle_devices(step, threshold, kind="gpu")), "{{team}}")],
            unit="short",
        ),
        w=12,
    )
    grid.add(
        g.Table(
            title=f"Pods idle for {prom.idle_window:g} s",
            description=f"Devices of running pods whose utilisation stayed under {threshold:g} % for the whole "
            "idle window: what GPUIdleWhileQueueWaits alerts on when equal or higher-tier work waits.",
            dataSource=DATASOURCE,
            targets=[
                g.Target(
                    expr=q.pod_idle_devices(prom.idle_window, threshold),
                    format="table",
                    instant=True,
                    refId="A",
                    datasource=DATASOURCE,
                )
            ],
            transformations=[
                {
                    "id": "organize",
                    "options": {"excludeByName": {"Time": True}, "renameByName": {"Value": "idle devices"}},
                }
            ],
        ),
        w=12,
    )

    grid.row("MIG slices")
    slices = q.device_utilisation(kind="slice")
    grid.add(
        timeseries(
            title="MIG slices by profile: reported and in use by running pods",
            description="MIG slices are counted as slices, never as whole GPUs.",
            targets=targets(
                (f"count by ({MIG_PROFILE}) ({slices})", f"{{{{{MIG_PROFILE}}}}} reported"),
                (
                    f"count by ({MIG_PROFILE}) (({slices}) and on (namespace, pod) {q.pod_running()})",
                    f"{{{{{MIG_PROFILE}}}}} in use",
                ),
            ),
            unit="short",
        ),
        w=12,
    )
    grid.add(
        timeseries(
            title="MIG slice utilisation per team",
            description="Mean graphics-engine activity of the slices each team's pods use, percent.",
            targets=[
                target(
                    per_team(
                        f"avg by (team) ({q.device_utilisation_avg(step, kind='slice')} "
                        f"* on (namespace) group_left (team) {q.namespace_team()})"
                    ),
                    "{{team}}",
                )
            ],
            unit="percent",
        ),
        w=12,
    )

    return dashboard(
        TITLE,
        UID,
        "GPU allocation and utilisation from DCGM and kube-state-metrics, with the queries Watchtower runs. "
        "Generated from the Watchtower configuration: do not edit.",
        grid,
        [
            datasource_variable(),
            query_variable("namespace", "Namespace", "label_values(kube_pod_info, namespace)"),
            query_variable("team", "Team", f"label_values(kube_namespace_labels, {_team_label(q)})"),
        ],
    )


def __getattr__(name: str) -> g.Dashboard:
    # grafanalib's generate-dashboard reads `dashboard`; built on access, not at import time.
    if name == "dashboard":
        return build(Settings())
    raise AttributeError(name)
