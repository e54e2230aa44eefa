"""A replay's document (watchtower.services.replay) as JSON, aligned text tables and CSV; the HTML page is the
report presenter's (watchtower.adapters.report.replay_page), as the fairness report's is.

Text puts the runs side by side: each tier (and each team) has one line per run, so the same tier under two
policies sits on adjacent lines. CSV has one row per (run, tier) and per (run, team).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from typing import Any

import orjson

from watchtower.domain.timefmt import format_duration

WAITS = ("mean", "p50", "p95", "p99", "max")
REFUSALS_SHOWN = 10
CSV_COLUMNS = (
    "run",
    "kind",
    "group",
    "name",
    "jobs",
    "refused",
    "never_started",
    *(f"wait_{w}_seconds" for w in WAITS),
    "preemptions",
    "preempted_jobs",
    "gpu_hours",
    "gpu_hours_lost",
    "attainment",
)


def as_json(doc: dict[str, Any]) -> bytes:
    """Return the document as indented JSON with sorted keys, ending in a newline (as `analyze` prints)."""
    return orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n"


def _cell(v: Any) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(v)
    text = str(v)
    # A cell a spreadsheet would read as a formula is quoted, as the fairness report's CSV does.
    return "'" + text if text[:1] in ("=", "+", "-", "@", "\t", "\r") else text


def as_csv(doc: dict[str, Any]) -> str:
    """Return one row per (run, tier) and (run, team); an empty cell is a missing figure, never 0."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for run in doc["runs"]:
        for group in ("tier", "team"):
            for g in run[f"{group}s"]:
                w.writerow(
                    _cell(v)
                    for v in (
                        run["name"],
                        run["kind"],
                        group,
                        g[group],
                        g["jobs"],
                        g["refused"],
                        g["never_started"],
                        *(g["wait_seconds"][k] for k in WAITS),
                        g["preemptions"],
                        g["preempted_jobs"],
                        g["gpu_hours"],
                        g["gpu_hours_lost"],
                        g["attainment"],
                    )
                )
    return out.getvalue()


def _one_line(text: str) -> str:
    # A name holding CR/LF (or other control characters) cannot forge lines of the table.
    return "".join(c if c.isprintable() else "?" for c in text)


def _wait(v: float | None) -> str:
    return "-" if v is None else format_duration(v)


def _num(v: float | None, digits: int = 1) -> str:
    return "-" if v is None else f"{v:,.{digits}f}"


def _pct(v: float | None) -> str:
    return "-" if v is None else f"{100 * v:.1f}%"


def table(header: Sequence[str], rows: Sequence[Sequence[str]], *, left: int = 1) -> list[str]:
    """Return the lines of an aligned table: the first `left` columns left-aligned, the rest right."""
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]

    def line(r: Sequence[str]) -> str:
        cells = [c.ljust(widths[i]) if i < left else c.rjust(widths[i]) for i, c in enumerate(r)]
        return "  ".join(cells).rstrip()

    return [line(header), *(line(r) for r in rows)]


def _groups(doc: dict[str, Any], group: str) -> list[str]:
    names: list[str] = []
    for run in doc["runs"]:
        for g in run[f"{group}s"]:
            if g[group] not in names:
                names.append(g[group])
    return names


def as_text(doc: dict[str, Any]) -> str:
    """Return the runs as aligned tables: the cluster's figures per run, then each tier's and each team's
    waits with one line per run."""
    t = doc["trace"]
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(t["skipped"].items()))
    lines = [
        f"trace: {t['jobs']} jobs, {t['observed_jobs']} with an observed start"
        + (f" (skipped: {skipped})" if skipped else ""),
        "",
    ]
    runs = doc["runs"]
    lines += table(
        ("run", "jobs", "refused", "utilisation", "preemptions", "GPU-h lost", "Jain"),
        [
            (
                _one_line(r["name"]),
                str(r["jobs"]),
                str(r["refused"]),
                _pct(r["utilisation"]),
                str(r["preemptions"]),
                _num(r["gpu_hours_lost"]),
                _num(r["jain_index"], 3),
            )
            for r in runs
        ],
    )
    for r in runs:
        refusals = r.get("refusals", [])
        if refusals:
            lines += ["", f"refused under {_one_line(r['name'])} (could never run):"]
            lines += [f"  {_one_line(x['id'])}: {x['reason']}" for x in refusals[:REFUSALS_SHOWN]]
            if len(refusals) > REFUSALS_SHOWN:
                lines.append(f"  and {len(refusals) - REFUSALS_SHOWN} more (--format json lists them all)")
    for group in ("tier", "team"):
        rows = []
        for name in _groups(doc, group):
            label = _one_line(name)
            for r in runs:
                g = next((g for g in r[f"{group}s"] if g[group] == name), None)
                if g is None:
                    continue
                w = g["wait_seconds"]
                rows.append(
                    (
                        label,
                        _one_line(r["name"]),
                        str(g["jobs"]),
                        *(_wait(w[k]) for k in WAITS),
                        str(g["preemptions"]),
                        _num(g["gpu_hours_lost"]),
                        _pct(g["attainment"]),
                    )
                )
                label = ""  # the group's name once, its runs beneath it
        lines += [
            "",
            *table((group, "run", "jobs", *WAITS, "preemptions", "GPU-h lost", "attainment"), rows, left=2),
        ]
    return "\n".join(lines) + "\n"
