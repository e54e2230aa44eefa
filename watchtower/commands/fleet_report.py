"""`watchtower report fairness --fleet`: the fleet's weekly fairness from the global metrics engine and each
cluster's Watchtower history.

Each cluster's figures are its own report's: FairnessReports.build, as the cluster's service runs it, on the
cluster's history (read over its API, GET /api/v1/fairness/history) and on the engine's answers cut down to
the cluster (adapters/prometheus/fleet_reader.py: every query asked once `by (cluster, ...)` for all of
them). domain/fairness/fleet.py then combines them. The clusters come from the command line for now
(`--cluster NAME=URL`); a cluster whose Watchtower does not answer, or whose series the engine does not
hold for the week, is named missing and not counted.
"""

from __future__ import annotations

import asyncio
import csv
import html
import io
import zoneinfo
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import httpx
import msgspec

from watchtower.adapters.history.remote import HistoryUnavailable, WeekHistory, fetch_history
from watchtower.adapters.prometheus.fairness import KSM, PrometheusFairness
from watchtower.adapters.prometheus.fleet_reader import ClusterView, FleetAnswers
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.bootstrap import fairness_queries
from watchtower.config.model import Settings
from watchtower.domain.fairness.fleet import FleetReport, HistoryWeek, combine
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fairness_report import FairnessReports

FLEET_FORMATS = ("json", "csv", "html", "text")
_DEFAULT_THETA = 10.0


def parse_clusters(given: list[str]) -> dict[str, str]:
    """Return name → URL from `--cluster NAME=URL` options; ValueError for a malformed or repeated one."""
    out: dict[str, str] = {}
    for g in given:
        name, sep, url = g.partition("=")
        if not sep or not name or not url.startswith(("http://", "https://")):
            raise ValueError(f"--cluster takes NAME=URL (http:// or https://): {g!r}")
        if name in out:
            raise ValueError(f"--cluster {name} is given twice")
        out[name] = url
    return out


async def cluster_reports(
    settings: Settings,
    *,
    prometheus: str,
    clusters: Mapping[str, str],
    week: IsoWeek,
    now: float,
    token: str | None = None,
    timeout: float = 10.0,
    tokens: Mapping[str, str | None] | None = None,
) -> tuple[dict[str, FairnessReport], dict[str, str], FleetAnswers]:
    """Return each cluster's own report of `week`, the clusters missing and why, and the engine's answers
    (what was asked). The histories are fetched at once; the reports built one after the other, so the
    first asks the engine and the rest find its answers."""
    reader = PrometheusReader(url=prometheus, timeout=max(60.0, timeout), retries=1)
    answers = FleetAnswers(reader, settings.cluster.label)
    theta = settings.prometheus.idle_threshold if settings.prometheus is not None else _DEFAULT_THETA
    missing: dict[str, str] = {}
    async with httpx.AsyncClient() as http:
        names = sorted(clusters)
        got = await asyncio.gather(
            *(
                fetch_history(
                    http, clusters[c], str(week), token=(tokens or {}).get(c, token), timeout=timeout
                )
                for c in names
            ),
            return_exceptions=True,
        )
    histories: dict[str, HistoryWeek] = {}
    for c, g in zip(names, got, strict=True):
        if isinstance(g, HistoryUnavailable):
            missing[c] = f"its Watchtower did not answer: {g}"
        elif isinstance(g, BaseException):
            raise g
        else:
            histories[c] = g
    reports: dict[str, FairnessReport] = {}
    try:
        for c, h in histories.items():
            metrics = PrometheusFairness(
                ClusterView(answers, c), fairness_queries(settings), idle_threshold=theta
            )
            built = FairnessReports(settings=settings, history=WeekHistory(h), metrics=metrics)
            if str(built.tz) != h.timezone:
                missing[c] = f"its weeks are in {h.timezone}, this report's in {built.tz}"
                continue
            report = await built.build(week, now=now)
            reports[c] = report
            ksm = next((s.hours_present for s in report.coverage if s.name == KSM), None)
            if ksm is None:  # no usage at all: the engine did not answer (the report's notes say how)
                missing[c] = f"the engine at {prometheus} could not answer for {week}"
            elif ksm <= 0:
                label = settings.cluster.label
                missing[c] = f'the engine holds no {KSM} series with {label}="{c}" in {week}'
    finally:
        reader.close()
    return reports, missing, answers


async def fleet_report(
    settings: Settings,
    *,
    prometheus: str,
    clusters: Mapping[str, str],
    week: IsoWeek,
    now: float,
    token: str | None = None,
    timeout: float = 10.0,
    tokens: Mapping[str, str | None] | None = None,
) -> FleetReport:
    """Return the fleet report of `week` over `clusters` (name → Watchtower URL); `tokens` by cluster name
    take the place of `token` for the clusters they name."""
    reports, missing, _ = await cluster_reports(
        settings,
        prometheus=prometheus,
        clusters=clusters,
        week=week,
        now=now,
        token=token,
        timeout=timeout,
        tokens=tokens,
    )
    start, end = week.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
    return combine(str(week), start, end, now, reports, missing)


class FleetUsageError(ValueError):
    """A command line the fleet report cannot run with, in words for the user."""


def fleet_body(
    load_settings: Callable[[], Settings],
    week: str | None,
    fmt: str,
    prometheus: str | None,
    clusters: list[str],
    token_file: Path | None,
    *,
    now: float,
) -> bytes:
    """Return the fleet report the command line asks for, rendered; FleetUsageError for a bad one."""
    from watchtower.services.fairness_send import last_complete_week

    if fmt not in FLEET_FORMATS:
        raise FleetUsageError(f"--format is one of {', '.join(FLEET_FORMATS)}")
    if not prometheus:
        raise FleetUsageError("--prometheus URL (the global engine) is required")
    try:
        named = parse_clusters(clusters)
        wk = IsoWeek.parse(week) if week is not None else None
    except ValueError as e:
        raise FleetUsageError(str(e)) from None
    token = _token(token_file, "--token-file") if token_file is not None else None
    settings = load_settings()
    tokens: dict[str, str | None] = {}
    if not named:
        # The clusters the fleet page lists (`fleet.clusters`), this one first when it is named, each with its
        # own token file unless --token-file gives one for all.
        if settings.cluster.name and settings.fleet.clusters:
            named[settings.cluster.name] = settings.server.external_url
        for c in settings.fleet.clusters:
            named[c.name] = c.url
            if token is None and c.token_file:
                tokens[c.name] = _token(Path(c.token_file), f"fleet.clusters {c.name} token_file")
    if not named:
        raise FleetUsageError(
            "name the clusters: --cluster NAME=URL, once each, or fleet.clusters in the config"
        )
    w = wk or last_complete_week(now, settings.fairness.timezone)
    report = asyncio.run(
        fleet_report(
            settings, prometheus=prometheus, clusters=named, week=w, now=now, token=token, tokens=tokens
        )
    )
    return render_fleet(report, fmt).encode()


def _token(path: Path, what: str) -> str:
    try:
        return path.read_text().strip()
    except OSError as e:
        raise FleetUsageError(f"{what} {path}: {e.strerror}") from None


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
