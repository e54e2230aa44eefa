"""`watchtower report fairness`: the weekly report from the configured store and Prometheus, printed or
emailed."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from watchtower.adapters.clock import SystemClock
from watchtower.bootstrap import (
    StartupError,
    build_container,
    fairness_mailer,
    fairness_reports,
    open_alert_store,
    open_history,
    report_presenter,
    store_location,
)
from watchtower.config.model import Settings
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.health import SourceHealth
from watchtower.ports import AlertStore, Clock, ReportSource
from watchtower.services.alerting import DeliveryWorker
from watchtower.services.fairness_send import REPORT_INTEGRATION, SendOutcome


class _Fixed:
    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at


def report_source_for(settings: Settings, *, clock: Clock | None = None) -> ReportSource | None:
    """Return the report service for the command line, which watches no cluster: each report is built from
    the configured store's history and Prometheus, the store opened for it and closed after. None when
    `fairness.enabled` is off.

    The source raises StartupError when there is no store to read (a SQLite file is never created by
    looking), UnknownTeam for a team not in the report."""
    if not settings.fairness.enabled:
        return None
    at = clock or SystemClock()

    async def source(week: IsoWeek, team: str | None, /) -> FairnessReport:
        where = store_location(settings)  # resolved once for this report, handed to the opener
        if where.kind == "sqlite" and not Path(where.location).is_file():
            raise StartupError(
                f"no state store at {where.location}: run the service (watchtower run) to record history"
            )
        history = open_history(settings, where=where)
        assert history is not None  # fairness.enabled was checked above
        try:
            return await fairness_reports(settings, history).build(week, now=at.now(), team=team)
        finally:
            history.close()

    return source


async def report_once(
    settings: Settings, week: IsoWeek | None, *, team: str | None, now: float
) -> FairnessReport:
    """Return one fairness report from the configured store and Prometheus, as `watchtower report` prints
    it (the last complete week when `week` is None).

    Raises StartupError when fairness is off or there is no store, UnknownTeam for a team not in the report."""
    source = report_source_for(settings, clock=_Fixed(now))
    if source is None:
        raise StartupError("fairness.enabled is false: no history is recorded")
    from watchtower.services.fairness_send import fetch_report, last_complete_week

    return await fetch_report(source, week or last_complete_week(now, settings.fairness.timezone), team)


def render_report(report: FairnessReport, fmt: str, *, team: str | None = None) -> str:
    """Return the report as `fmt` (json, csv, html with the charts inline, text); ValueError naming the
    formats for another."""
    from watchtower.api.fairness.formats import render

    body, _ = render(report, fmt, presenter=report_presenter(), team=team)
    return body.decode()


async def send_reports(
    settings: Settings,
    source: ReportSource,
    week: IsoWeek,
    *,
    clock: Clock | None = None,
    deliver_for: float = 120.0,
) -> tuple[SendOutcome, dict[str, int]]:
    """Enqueue `week`'s report emails (`--send`): each recipient not yet sent it, through the state store's
    outbox, then deliver the reports' messages for up to `deliver_for` seconds (0: leave them to the running
    service). Return the outcome and the week's report messages by status; what is still pending is
    delivered by the service on the same store (or the next `--send`).

    Raises StartupError without an email receiver or a state store."""
    import httpx

    from watchtower.adapters.senders import build_report_sender

    clock = clock or SystemClock()
    store = open_alert_store(settings)
    if store is None:
        raise StartupError("sending reports needs the state store: alerting.enabled is off")
    try:
        async with httpx.AsyncClient() as http:
            sender = build_report_sender(
                settings.alerting, receiver=settings.fairness.smtp_receiver, http=http
            )
            if sender is None:
                raise StartupError(
                    "no email receiver in alerting.receivers has the SMTP settings to send with"
                )
            container = build_container(
                settings,
                clock=clock,
                source_health=SourceHealth,  # no cluster is watched: namespaces' annotations are not read
                source_name="cli",
                alert_store=store,
                report_source=source,
            )
            mailer = fairness_mailer(container, store)
            if mailer is None:
                raise StartupError("fairness.enabled is off")
            outcome = await mailer.send_week(week)
            worker = DeliveryWorker(
                store=_ReportsOnly(store),
                senders={REPORT_INTEGRATION: sender},
                clock=clock,
                cfg=settings.alerting,
            )
            deadline = time.monotonic() + deliver_for
            while time.monotonic() < deadline and _pending_reports(store, str(week)):
                await worker.drain()
                await asyncio.sleep(0.2)
            return outcome, _report_statuses(store, str(week))
    finally:
        store.close()


class _ReportsOnly:
    """The store as the CLI's delivery sees it: only the reports' messages are due, so the alert
    notifications in the same outbox are left to the service that owns them."""

    def __init__(self, store: AlertStore) -> None:
        self._store = store

    def due(self, now: float) -> list[Any]:
        return [m for m in self._store.due(now) if m.integration == REPORT_INTEGRATION]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _report_statuses(store: AlertStore, week: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in store.messages(limit=100_000):
        if m.integration == REPORT_INTEGRATION and m.group_key == f"fairness:{week}":
            out[m.status.value] = out.get(m.status.value, 0) + 1
    return out


def _pending_reports(store: AlertStore, week: str) -> bool:
    return _report_statuses(store, week).get("pending", 0) > 0
