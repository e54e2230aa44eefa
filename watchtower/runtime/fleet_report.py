"""Building the fleet's fairness report: the global metrics engine and each cluster's Watchtower history.

Each cluster's figures are its own report's: FairnessReports.build, as the cluster's service runs it, on the
cluster's history (read over its API, GET /api/v1/fairness/history) and on the engine's answers cut down to
the cluster (adapters/prometheus/fleet_reader.py: every query asked once `by (cluster, ...)` for all of
them). domain/fairness/fleet.py then combines them. A cluster whose Watchtower does not answer, or whose
series the engine does not hold for the week, is named missing and not counted.

Here, below the commands, so the command (`watchtower report fairness --fleet`) and the leader's weekly
job (runtime/weekly_report.py) build the same report through the same code.
"""

from __future__ import annotations

import asyncio
import zoneinfo
from collections.abc import Callable, Mapping
from pathlib import Path

import httpx

from watchtower.adapters.history.remote import HistoryUnavailable, WeekHistory, fetch_history
from watchtower.adapters.prometheus.fairness import KSM, PrometheusFairness
from watchtower.adapters.prometheus.fleet_reader import ClusterView, FleetAnswers
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.bootstrap import fairness_queries
from watchtower.config.model import Settings
from watchtower.domain.fairness.fleet import FleetReport, HistoryWeek, combine
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.ports import Clock, ReportOutbox
from watchtower.services.fairness_report import FairnessReports
from watchtower.services.fleet_send import FleetMailer

_DEFAULT_THETA = 10.0


def configured_clusters(settings: Settings) -> tuple[dict[str, str], dict[str, str | None]]:
    """Return name → URL of the clusters `fleet.clusters` lists (this one first when it is named) and
    name → bearer token read from each one's token file; OSError when a token file cannot be read."""
    named: dict[str, str] = {}
    tokens: dict[str, str | None] = {}
    if settings.cluster.name and settings.fleet.clusters:
        named[settings.cluster.name] = settings.server.external_url
    for c in settings.fleet.clusters:
        named[c.name] = c.url
        if c.token_file:
            tokens[c.name] = Path(c.token_file).read_text().strip()
    return named, tokens


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


def fleet_mailer(
    settings: Settings, outbox: ReportOutbox, clock: Clock, *, wake: Callable[[], None] | None = None
) -> FleetMailer:
    """Return what enqueues the weekly fleet report emails of `fleet.report` (the leader's weekly job runs it)."""
    cfg = settings.fleet.report

    async def source(week: IsoWeek) -> FleetReport:
        # Read at each send: the clusters' token files may have been rotated since the start. The command's
        # wait for each Watchtower (10 s), not the fleet page's: a week's history is a bigger answer.
        clusters, tokens = configured_clusters(settings)
        return await fleet_report(
            settings,
            prometheus=cfg.prometheus,
            clusters=clusters,
            week=week,
            now=clock.now(),
            tokens=tokens,
        )

    return FleetMailer(
        source=source,
        outbox=outbox,
        clock=clock,
        timezone=settings.fairness.timezone,
        recipients=cfg.recipients,
        on_enqueued=wake,
    )
