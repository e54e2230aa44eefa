"""Building blocks of the dashboards: the datasource and variables, panels placed on Grafana's 24-column grid."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from grafanalib import core as g

DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
TIER_COLOURS = ("red", "orange", "yellow", "green", "blue", "purple")


def target(expr: str, legend: str = "", *, ref: str = "A", instant: bool = False) -> g.Target:
    return g.Target(expr=expr, legendFormat=legend, refId=ref, instant=instant, datasource=DATASOURCE)


def targets(*pairs: tuple[str, str]) -> list[g.Target]:
    return [target(expr, legend, ref=chr(ord("A") + i)) for i, (expr, legend) in enumerate(pairs)]


def timeseries(title: str, description: str, targets: list[g.Target], **options: Any) -> g.TimeSeries:
    """A time series panel on the dashboard's datasource; `options` are grafanalib's (unit, valueMin...)."""
    return g.TimeSeries(
        title=title, description=description, dataSource=DATASOURCE, targets=targets, **options
    )


def bucket_heatmap(title: str, description: str, expr: str, **options: Any) -> g.Heatmap:
    """A heatmap of a histogram's per-bucket counts (`expr` by `le`), as Grafana draws precomputed buckets;
    `options` add to its panel options (say, a filter on the `le` label)."""
    return g.Heatmap(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=[
            g.Target(expr=expr, format="heatmap", legendFormat="{{le}}", refId="A", datasource=DATASOURCE)
        ],
        extraJson={
            "options": {
                "calculate": False,
                "yAxis": {"unit": "s"},
                "color": {"mode": "scheme", "scheme": "Oranges", "steps": 64},
                **options,
                "cellValues": {"unit": "short"},
            }
        },
    )


def instant_table(title: str, description: str, columns: list[tuple[str, str]]) -> g.Table:
    """A table of the instant values of several expressions, one column per (name, expression), merged on
    their common labels (one row per team, say)."""
    refs = [chr(ord("A") + i) for i in range(len(columns))]
    return g.Table(
        title=title,
        description=description,
        dataSource=DATASOURCE,
        targets=[
            g.Target(expr=expr, format="table", instant=True, refId=ref, datasource=DATASOURCE)
            for ref, (_, expr) in zip(refs, columns, strict=True)
        ],
        transformations=[
            {"id": "merge", "options": {}},
            {
                "id": "organize",
                "options": {
                    "excludeByName": {"Time": True},
                    "renameByName": {
                        f"Value #{ref}": name for ref, (name, _) in zip(refs, columns, strict=True)
                    },
                },
            },
        ],
    )


def datasource_variable() -> g.Template:
    return g.Template(name="datasource", label="Data source", query="prometheus", type="datasource")


def query_variable(name: str, label: str, query: str) -> g.Template:
    """A multi-value variable filled from `query` (label_values(...)), with "All" meaning any value."""
    return g.Template(
        name=name,
        label=label,
        query=query,
        dataSource=DATASOURCE,
        includeAll=True,
        multi=True,
        allValue=".*",
        refresh=2,  # on time-range change: namespaces come and go
        sort=1,
    )


@dataclass
class Grid:
    """Places panels left to right, wrapping at 24 columns; `row()` starts a titled row."""

    panels: list[g.Panel] = field(default_factory=list)
    x: int = 0
    y: int = 0
    height: int = 0
    next_id: int = 1

    def row(self, title: str) -> None:
        self._newline()
        self.panels.append(
            g.RowPanel(title=title, gridPos=g.GridPos(h=1, w=24, x=0, y=self.y), id=self._id())
        )
        self.y += 1

    def add(self, panel: g.Panel, *, w: int = 12, h: int = 8) -> None:
        if self.x + w > 24:
            self._newline()
        panel.gridPos = g.GridPos(h=h, w=w, x=self.x, y=self.y)
        panel.id = self._id()
        self.panels.append(panel)
        self.x += w
        self.height = max(self.height, h)

    def _newline(self) -> None:
        if self.x:
            self.y += self.height
        self.x, self.height = 0, 0

    def _id(self) -> int:
        self.next_id += 1
        return self.next_id - 1


def wait_thresholds(warn: float, critical: float) -> list[g.Threshold]:
    """Grafana thresholds for a wait panel: green under warn, orange from warn, red from critical."""
    return [
        g.Threshold("green", 0, 0.0),
        g.Threshold("orange", 1, warn),
        g.Threshold("red", 2, critical),
    ]


def dashboard(title: str, uid: str, description: str, grid: Grid, templates: list[g.Template]) -> g.Dashboard:
    return g.Dashboard(
        title=title,
        uid=uid,
        description=description,
        tags=["watchtower", "generated"],
        panels=grid.panels,
        templating=g.Templating(list=templates),
        time=g.Time("now-6h", "now"),
        timezone="utc",
        refresh="1m",
        graphTooltip=g.GRAPH_TOOLTIP_MODE_SHARED_CROSSHAIR,
    ).auto_panel_ids()
