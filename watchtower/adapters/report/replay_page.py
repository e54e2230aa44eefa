"""A replay's document as one self-contained HTML page in the fairness report's style: the runs side by side
per tier and per team, a wait chart per tier (the runs' bars beside each other, inline as data: URIs), and how
closely the first policy's replay reproduces what was observed.

Jinja2 escapes every value (autoescape): team, tier and policy names come from the user's files.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jinja2

from watchtower.domain.timefmt import format_duration

TEMPLATES = Path(__file__).parent / "templates"

WAITS = ("mean", "p50", "p95", "p99", "max")


def _wait(v: float | None) -> str:
    return "missing" if v is None else format_duration(v)


def _pct(v: float | None) -> str:
    return "missing" if v is None else f"{100 * v:.1f} %"


def _num(v: float | None, digits: int = 1) -> str:
    return "missing" if v is None else f"{v:,.{digits}f}"


def _rows(runs: Sequence[Mapping[str, Any]], group: str) -> list[dict[str, Any]]:
    """Return each tier (or team) with one line of figures per run that has it, in first-seen order."""
    names: list[str] = []
    for r in runs:
        for g in r[f"{group}s"]:
            if g[group] not in names:
                names.append(g[group])
    out = []
    for name in names:
        lines = []
        for r in runs:
            g = next((g for g in r[f"{group}s"] if g[group] == name), None)
            if g is None:
                continue
            lines.append(
                {
                    "run": r["name"],
                    "jobs": g["jobs"],
                    "refused": g["refused"],
                    "waits": [_wait(g["wait_seconds"][k]) for k in WAITS],
                    "preemptions": g["preemptions"],
                    "lost": _num(g["gpu_hours_lost"]),
                    "attainment": _pct(g["attainment"]),
                    "raw": g["wait_seconds"],
                }
            )
        out.append({"name": name, "runs": lines})
    return out


def _fidelity(doc: Mapping[str, Any]) -> tuple[str, list[dict[str, str]], str] | None:
    """Return the first replayed run's name, per tier observed vs replayed p50 and p95 of the same jobs,
    and what was left out; None without an observed run. A document without `fidelity` (made before it
    was added) compares the runs' tiers, whose jobs may differ."""
    close = doc.get("fidelity")
    if close is not None:
        rows = []
        for g in close["tiers"]:
            row = {"tier": g["tier"]}
            for k in ("p50", "p95"):
                a, b = g["observed"][k], g["replayed"][k]
                row[f"observed_{k}"], row[f"replayed_{k}"] = _wait(a), _wait(b)
                row[f"diff_{k}"] = f"{100 * (b - a) / a:+.0f} %" if a and b is not None else "–"
            rows.append(row)
        out = ", ".join(f"{n} {why}" for why, n in close["left_out"].items() if n)
        return close["policy"], rows, f"{close['jobs']} jobs compared" + (f"; left out: {out}" if out else "")
    runs = doc["runs"]
    observed = next((r for r in runs if r["kind"] == "observed"), None)
    replayed = next((r for r in runs if r["kind"] == "replayed"), None)
    if observed is None or replayed is None:
        return None
    mine = {g["tier"]: g["wait_seconds"] for g in replayed["tiers"]}
    rows = []
    for g in observed["tiers"]:
        seen, got = g["wait_seconds"], mine.get(g["tier"], {})
        row = {"tier": g["tier"]}
        for k in ("p50", "p95"):
            a, b = seen.get(k), got.get(k)
            row[f"observed_{k}"], row[f"replayed_{k}"] = _wait(a), _wait(b)
            row[f"diff_{k}"] = f"{100 * (b - a) / a:+.0f} %" if a and b is not None else "–"
        rows.append(row)
    return replayed["name"], rows, ""


class ReplayPage:
    """Renders a replay's page (ports.ReplayPresenter)."""

    def __init__(self) -> None:
        loader = jinja2.FileSystemLoader(str(TEMPLATES))
        self.env = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)

    def page(self, doc: Mapping[str, Any], *, links: Sequence[tuple[str, str]] = ()) -> str:
        # Imported here: a service builds this presenter at start, and most never draw a replay's chart.
        from . import charts

        runs = doc["runs"]
        tiers = _rows(runs, "tier")
        images = {}
        for t in tiers:
            png = charts.replay_waits_chart(t["name"], [(line["run"], line["raw"]) for line in t["runs"]])
            images[t["name"]] = "data:image/png;base64," + base64.b64encode(png).decode()
        trace = doc["trace"]
        return self.env.get_template("replay.html.j2").render(
            title="Watchtower policy replay: " + ", ".join(r["name"] for r in runs),
            trace=trace,
            skipped=sorted(trace["skipped"].items()),
            runs=[
                {
                    "name": r["name"],
                    "kind": r["kind"],
                    "jobs": r["jobs"],
                    "refused": r["refused"],
                    "capacity": r["capacity_gpus"],
                    "utilisation": _pct(r["utilisation"]),
                    "preemptions": r["preemptions"],
                    "lost": _num(r["gpu_hours_lost"]),
                    "jain": _num(r["jain_index"], 3),
                    "refusals": r["refusals"][:20],
                    "more_refusals": max(0, len(r["refusals"]) - 20),
                }
                for r in runs
            ],
            tiers=tiers,
            teams=_rows(runs, "team"),
            waits=WAITS,
            images=images,
            chart_height=charts.REPLAY_HEIGHT,
            fidelity=_fidelity(doc),
            page_links=list(links),
        )
