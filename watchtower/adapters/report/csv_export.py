"""The weekly report as CSV: one row per team, every figure of its TeamReport a column (docs/fairness.md).

An empty cell is a missing figure, never 0. A text cell that a spreadsheet would read as a formula (it
begins with = + - @, a tab or CR) is prefixed with a single quote.
"""

from __future__ import annotations

import csv
import io

from watchtower.domain.fairness.report import FairnessReport, TeamReport
from watchtower.domain.fairness.what_if import WhatIf

RESOURCES = ("gpu", "cpu", "memory")
FIXED = (
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
    *(f"share_{r}" for r in RESOURCES),
    "dominant_resource",
    "gpu_hours_lost",
    "idle_allocated_gpu_hours",
    "idle_share",
    "starvation_incidents",
    "gang_stalls",
    "long_running",
    "top_waiting",
    "jain_cluster",
)
PER_TIER = (
    "waits_finished",
    "wait_p50_s",
    "wait_p95_s",
    "wait_max_s",
    "waits_censored",
    "censored_oldest_s",
    "preemptions_suffered",
    "preemptions_caused",
)


def _num(v: float | None) -> str:
    return "" if v is None else repr(round(v, 6)) if isinstance(v, float) else str(v)


def _text(v: str) -> str:
    return "'" + v if v[:1] in ("=", "+", "-", "@", "\t", "\r") else v


def tiers_of(report: FairnessReport) -> list[str]:
    order = list(report.method.critical_after)
    seen: set[str] = set()
    for t in report.teams:
        seen |= {w.tier for w in t.waits} | set(t.preemptions_suffered) | set(t.preemptions_caused)
    return [t for t in order if t in seen] + sorted(seen - set(order))


def header(report: FairnessReport) -> list[str]:
    return [
        *FIXED,
        *(f"{c}_{_text(t)}" for t in tiers_of(report) for c in PER_TIER),
        *_what_if_header(report.what_if),
    ]


# The "What if" section, after every column above (a report without it has none of these): each run's
# figures for the row's team, then each run's waits per tier (the cluster's, repeated on every row as
# jain_cluster is), then a note saying what is missing and why.
PER_RUN = ("whatif_jobs", "whatif_wait_mean_s", "whatif_attainment")
PER_POLICY = ("whatif_wait_change_s", "whatif_attainment_change")
PER_RUN_TIER = ("whatif_wait_p50_s", "whatif_wait_p95_s")


def _what_if_header(w: WhatIf | None) -> list[str]:
    if w is None:
        return []
    out = []
    for r in w.runs:
        out += [f"{c}_{_text(r.name)}" for c in PER_RUN]
        if r.kind == "policy":
            out += [f"{c}_{_text(r.name)}" for c in PER_POLICY]
    out += [f"{c}_{_text(t.tier)}_{_text(f.run)}" for t in w.tiers for f in t.runs for c in PER_RUN_TIER]
    return [*out, "whatif_note"]


def _what_if_cells(w: WhatIf | None, team: str) -> list[str]:
    if w is None:
        return []
    mine = next((t for t in w.teams if t.team == team), None)
    figures = {f.run: f for f in mine.runs} if mine is not None else {}
    out = []
    for r in w.runs:
        f = figures.get(r.name)
        out += [str(f.jobs), _num(f.wait_mean), _num(f.attainment)] if f is not None else ["0", "", ""]
        if r.kind == "policy":
            out += [_num(f.wait_change), _num(f.attainment_change)] if f is not None else ["", ""]
    out += [_num(v) for t in w.tiers for f in t.runs for v in (f.p50, f.p95)]
    note = [w.empty] if w.empty else []
    note += [f"{f.policy}: could not be replayed: {f.why}" for f in w.failures]
    return [*out, _text("; ".join(note))]


def _row(week: str, t: TeamReport, tiers: list[str], jain: float | None) -> list[str]:
    row = [
        week,
        _text(t.team),
        _text(" ".join(t.namespaces)),
        _num(t.used),
        _num(t.entitlement),
        t.entitlement_source,
        _num(t.attainment),
        _num(t.borrowed),
        _num(t.lent),
        _num(t.demand),
        _num(t.fair_share),
        _num(t.satisfaction),
        *(_num(t.shares.get(r)) for r in RESOURCES),
        t.dominant_resource or "",
        _num(t.gpu_hours_lost),
        _num(t.idle_allocated),
        _num(t.idle_share),
        str(t.starvation_incidents),
        str(t.gang_stalls),
        str(len(t.long_running)),
        str(len(t.top_waiting)),
        _num(jain),
    ]
    waits = {w.tier: w for w in t.waits}
    for tier in tiers:
        w = waits.get(tier)
        row += (
            [str(w.finished), _num(w.p50), _num(w.p95), _num(w.max), str(w.censored), _num(w.censored_oldest)]
            if w is not None
            else ["0", "", "", "", "0", ""]
        )
        row += [str(t.preemptions_suffered.get(tier, 0)), str(t.preemptions_caused.get(tier, 0))]
    return row


def report_csv(report: FairnessReport) -> str:
    """Return the CSV text (RFC 4180, CRLF line ends, a header row)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\r\n")
    w.writerow(header(report))
    tiers = tiers_of(report)
    for t in report.teams:
        w.writerow(
            [*_row(report.week, t, tiers, report.cluster.jain), *_what_if_cells(report.what_if, t.team)]
        )
    return buf.getvalue()
