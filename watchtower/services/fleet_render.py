"""The fleet fairness report rendered: JSON, CSV, HTML (escaped) and plain text.

Shared by `watchtower report fairness --fleet` and the weekly fleet email (services/fleet_send.py), so both
show the same figures in the same words.
"""

from __future__ import annotations

import csv
import html
import io
from typing import Any

import msgspec

from watchtower.domain.fairness.fleet import FleetReport

FLEET_FORMATS = ("json", "csv", "html", "text")


def _n(v: float | None, fmt: str = "{:.1f}") -> str:
    return "" if v is None else fmt.format(v)


def _pct(v: float | None) -> str:
    return "" if v is None else f"{100 * v:.0f} %"


def _rows(r: FleetReport) -> list[list[str]]:
    """One row per team and cluster, then the team's fleet row (cluster "all")."""
    rows = []
    for t in r.teams:
        for c in t.clusters:
            rows.append(
                [
                    t.team,
                    c.cluster,
                    _n(c.used),
                    _n(c.entitlement),
                    _n(c.attainment, "{:.3f}"),
                    _n(c.satisfaction, "{:.3f}"),
                    "yes" if c.waited else "",
                ]
            )
        rows.append(
            [
                t.team,
                "all",
                _n(t.used),
                _n(t.entitlement),
                _n(t.attainment, "{:.3f}"),
                _n(t.satisfaction, "{:.3f}"),
                " ".join(t.waited_in),
            ]
        )
    return rows


HEADER = [
    "team",
    "cluster",
    "gpu_hours_used",
    "gpu_hours_entitled",
    "attainment",
    "satisfaction",
    "waited_in",
]


def render_fleet(r: FleetReport, fmt: str) -> str:
    """Return the fleet report as json, csv, html or text; ValueError for another format."""
    if fmt == "json":
        return msgspec.json.encode(_json(r)).decode() + "\n"
    if fmt == "csv":
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(HEADER)
        w.writerows(_rows(r))
        return buf.getvalue()
    lines_clusters = [
        (
            c.name,
            "missing: " + c.missing
            if c.missing
            else f"{_n(c.used)} GPU-hours used, {_n(c.capacity_gpus, '{:.0f}')} GPUs, Jain {_n(c.jain, '{:.3f}')}",
        )
        for c in r.clusters
    ]
    if fmt == "text":
        table = [HEADER, *_rows(r)]
        widths = [max(len(row[i]) for row in table) for i in range(len(HEADER))]
        out = [
            f"Fleet fairness report {r.week}",
            f"GPU-hours used {_n(r.used)}, entitled {_n(r.entitled)}; Jain's index {_n(r.jain, '{:.3f}')} "
            f"over {r.teams_with_demand} teams with demand",
            "",
            "Clusters:",
            *(f"  {name}: {what}" for name, what in lines_clusters),
            "",
            *("  ".join(f"{v:>{w}}" for v, w in zip(row, widths, strict=True)) for row in table),
        ]
        out += ["", *r.notes] if r.notes else []
        return "\n".join(out) + "\n"
    if fmt == "html":
        e = html.escape
        cells = "".join("<tr>" + "".join(f"<td>{e(v)}</td>" for v in row) + "</tr>" for row in _rows(r))
        clusters = "".join(f"<li><b>{e(n)}</b>: {e(w)}</li>" for n, w in lines_clusters)
        notes = "".join(f"<li>{e(n)}</li>" for n in r.notes)
        return (
            f"<!doctype html><html><head><meta charset=utf-8><title>Fleet fairness {e(r.week)}</title></head>"
            f"<body><h1>Fleet fairness report {e(r.week)}</h1>"
            f"<p>GPU-hours used {_n(r.used)}, entitled {_n(r.entitled)}; Jain's index "
            f"{_n(r.jain, '{:.3f}')} over {r.teams_with_demand} teams with demand</p>"
            f"<ul>{clusters}</ul><table><tr>{''.join(f'<th>{h}</th>' for h in HEADER)}</tr>{cells}</table>"
            f"<ul>{notes}</ul></body></html>\n"
        )
    raise ValueError(f"--format is one of {', '.join(FLEET_FORMATS)}")


def _json(r: FleetReport) -> dict[str, Any]:
    return {
        "week": r.week,
        "start": r.start,
        "end": r.end,
        "generated_at": r.generated_at,
        "used": r.used,
        "entitled": r.entitled,
        "jain": r.jain,
        "teams_with_demand": r.teams_with_demand,
        "missing": list(r.missing),
        "clusters": [_plain(c) for c in r.clusters],
        "teams": [_plain(t) for t in r.teams],
        "notes": list(r.notes),
    }


def _plain(obj: Any) -> Any:
    return msgspec.to_builtins(obj)
