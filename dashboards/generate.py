"""The dashboards (`dashboards/*.dashboard.py`) rendered as Grafana JSON for `dashboards/generated/`.
`watchtower generate` writes them (watchtower/commands/generate.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

from grafanalib._gen import DashboardEncoder

from watchtower.config import Settings
from watchtower.domain.promql.fleet import keep_label, label_values_query, narrow
from watchtower.domain.promql.names import LAST_EVALUATION

from . import panels

HERE = Path(__file__).parent

# grafanalib 0.7 still writes parts of Grafana's older dashboard model: the row-based layout keys, the
# pre-7 table and graph options, the pre-9 heatmap options, threshold steps with graph-era fields, variables
# with tag queries. Grafana ignores or migrates them on load, and its JSON schema has no room for them, so
# they are dropped here and the files hold the model Grafana saves today. The dashboards set the modern
# equivalents themselves (fieldConfig, options). Per object kind, since the same key means other things
# elsewhere.
_LEGACY_DASHBOARD = ("__inputs", "rows", "style", "hideControls", "sharedCrosshair", "inputs", "gnetId", "id")
_LEGACY_PANEL = (
    "span",
    "height",
    "minSpan",
    "error",
    "editable",
    "cacheTimeout",
    "hideTimeOverride",
    # pre-7 table
    "color",
    "columns",
    "fontSize",
    "mappings",
    # pre-9 heatmap
    "cards",
    "dataFormat",
    "heatmap",
    "hideZeroBuckets",
    "highlightCards",
    "legend",
    "reverseYBuckets",
    "tooltip",
    "xAxis",
    "yAxis",
)
_LEGACY_VARIABLE = ("useTags", "tagsQuery", "tagValuesQuery")


def sources() -> list[Path]:
    return sorted(HERE.glob("*.dashboard.py"))


def load(path: Path) -> ModuleType:
    """Import a `*.dashboard.py` file (its dotted name cannot be imported the usual way)."""
    spec = importlib.util.spec_from_file_location(f"dashboards._{path.name.split('.')[0]}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _drop_none(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _drop_none(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_none(v) for v in node]
    return node


def normalise(data: dict[str, Any]) -> dict[str, Any]:
    """Return grafanalib's dashboard dict in the model Grafana saves: legacy keys and nulls dropped."""
    out: dict[str, Any] = _drop_none({k: v for k, v in data.items() if k not in _LEGACY_DASHBOARD})
    out["timepicker"] = {}
    out["panels"] = [_panel(p) for p in out.get("panels", [])]
    out["templating"] = {"list": [_variable(v) for v in out.get("templating", {}).get("list", [])]}
    return out


def _panel(p: dict[str, Any]) -> dict[str, Any]:
    p = {k: v for k, v in p.items() if k not in _LEGACY_PANEL}
    if p.get("type") == "row":
        return {k: p[k] for k in ("type", "collapsed", "title", "gridPos", "id", "panels") if k in p}
    if not isinstance(p.get("options"), dict):
        p["options"] = {}
    fc = p.setdefault("fieldConfig", {})
    fc.setdefault("defaults", {})
    fc.setdefault("overrides", [])
    steps = fc["defaults"].get("thresholds", {}).get("steps")
    if steps is not None:
        # The first step is the base colour, from -Infinity: Grafana writes its value as null.
        fc["defaults"]["thresholds"]["steps"] = [
            {"color": st["color"], "value": None if i == 0 else st["value"]} for i, st in enumerate(steps)
        ]
    return p


def _variable(v: dict[str, Any]) -> dict[str, Any]:
    v = {k: val for k, val in v.items() if k not in _LEGACY_VARIABLE}
    cur = v.get("current")
    if not (isinstance(cur, dict) and "text" in cur and "value" in cur):
        v.pop("current", None)  # nothing selected yet: Grafana picks the first option (or All)
    return v


def _json(obj: Any) -> Any:
    return json.loads(json.dumps(obj.to_json_data(), cls=DashboardEncoder))


def render(module: ModuleType, settings: Settings) -> tuple[str, str]:
    """Return (file name, JSON text) of one dashboard module built from `settings` (in fleet mode, with
    `fleet()` applied)."""
    board = module.build(settings)
    data = normalise(_json(board))
    if settings.artefacts.fleet:
        data = fleet(data, settings.cluster.label)
    text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    return f"{board.uid}.json", text


# Panels whose series are drawn per label value (a heatmap's buckets, a table's rows and matrix cells):
# another label in them would stack or overwrite clusters, so in fleet mode they repeat once per cluster.
_REPEATED = ("heatmap", "table")


def fleet(data: dict[str, Any], label: str) -> dict[str, Any]:
    """Return a normalised dashboard in fleet mode: a `cluster` variable (multi-select, All) after the
    datasource; every query keeps `label` in its aggregations and joins and reads only the selected
    clusters; series legends name the cluster; heatmaps and tables repeat per selected cluster."""
    matcher = f'{label}=~"$cluster"'
    query = f"label_values({LAST_EVALUATION}, {label})"
    variable = _variable(_drop_none(_json(panels.query_variable("cluster", "Cluster", query))))
    others = []
    for v in data["templating"]["list"]:
        if v.get("type") == "query":
            v = {**v, "query": label_values_query(v["query"], matcher)}
        others.append(v)
    at = next((i + 1 for i, v in enumerate(others) if v.get("type") == "datasource"), 0)
    data["templating"] = {"list": [*others[:at], variable, *others[at:]]}
    data["panels"] = [_fleet_panel(p, label, matcher) for p in data["panels"]]
    return data


def _fleet_panel(p: dict[str, Any], label: str, matcher: str) -> dict[str, Any]:
    if p.get("type") == "row":
        if "panels" not in p:
            return p
        return {**p, "panels": [_fleet_panel(x, label, matcher) for x in p["panels"]]}
    repeat = p.get("type") in _REPEATED
    targets = []
    for t in p.get("targets", []):
        t = {**t, "expr": narrow(keep_label(t["expr"], label), matcher)}
        if t.get("legendFormat") and not repeat:
            t["legendFormat"] = f"{{{{{label}}}}} {t['legendFormat']}"
        targets.append(t)
    p = {**p, "targets": targets}
    if repeat:  # one copy per selected cluster, its title naming it
        p.update(title=f"{p['title']} — $cluster", repeat="cluster", repeatDirection="v")
    return p


def render_all(settings: Settings) -> dict[Path, str]:
    out = {}
    for path in sources():
        name, text = render(load(path), settings)
        out[Path("generated") / name] = text
    return out
