"""The fairness report as CSV: one row per team, the figures as columns (docs/json.md lists them); an empty
cell is a missing figure. Cells a spreadsheet would run as a formula are quoted with a leading apostrophe."""

from __future__ import annotations

import csv
import io

from watchtower.domain.fairness.report import FairnessReport, TeamReport

COLUMNS = (
    "week",
    "team",
    "namespaces",
    "used_gpu_hours",
    "entitlement_gpu_hours",
    "entitlement_source",
    "attainment",
    "borrowed_gpu_hours",
    "lent_gpu_hours",
    "demand_gpu_hours",
    "fair_share_gpu_hours",
    "satisfaction",
    "gpu_share",
    "cpu_share",
    "memory_share",
    "dominant_resource",
    "waits_finished",
    "wait_p50_seconds",
    "wait_p95_seconds",
    "wait_max_seconds",
    "waits_censored",
    "censored_oldest_seconds",
    "preemptions_suffered",
    "preemptions_caused",
    "gpu_hours_lost",
    "idle_allocated_gpu_hours",
    "idle_share",
    "starvation_incidents",
    "gang_stalls",
    "long_running",
    "jain_cluster",
)


def _cell(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return repr(round(v, 4))
    s = str(v)
    # A name starting with = + - @ would be a formula in a spreadsheet (CSV injection).
    return "'" + s if s[:1] in ("=", "+", "-", "@", "\t", "\r") else s


def _worst(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return max(known) if known else None


def team_row(week: str, t: TeamReport, jain: float | None) -> list[str]:
    w = t.waits
    finished = sum(x.finished for x in w)
    row: list[object] = [
        week,
        t.team,
        " ".join(t.namespaces),
        t.used,
        t.entitlement,
        t.entitlement_source,
        t.attainment,
        t.borrowed,
        t.lent,
        t.demand,
        t.fair_share,
        t.satisfaction,
        t.shares.get("gpu"),
        t.shares.get("cpu"),
        t.shares.get("memory"),
        t.dominant_resource,
        finished,
        # Across tiers the CSV gives the worst tier's figure; the JSON has each tier's.
        _worst([x.p50 for x in w]),
        _worst([x.p95 for x in w]),
        _worst([x.max for x in w]),
        sum(x.censored for x in w),
        _worst([x.censored_oldest for x in w]),
        sum(t.preemptions_suffered.values()),
        sum(t.preemptions_caused.values()),
        t.gpu_hours_lost,
        t.idle_allocated,
        t.idle_share,
        t.starvation_incidents,
        t.gang_stalls,
        len(t.long_running),
        jain,
    ]
    return [_cell(v) for v in row]


def report_csv(r: FairnessReport) -> str:
    """Return the report's CSV: a header row, then one row per team by name."""
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\r\n")
    w.writerow(COLUMNS)
    for t in r.teams:
        w.writerow(team_row(r.week, t, r.cluster.jain))
    return out.getvalue()
