"""The weekly fairness report as a page at `/reports/fairness/{week}` (and `?team=`), charts inline.

The report comes from the container's `report_source` (the report service) and is rendered by its
`report_presenter`, the same HTML as the email's with the charts as data: URIs; each chart is also served
alone at `/reports/fairness/{week}/charts/{name}.png`. Bad input gets a page that says what was wrong.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
from typing import Annotated
from zoneinfo import ZoneInfo

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse, Response

from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.ports import PromReadError, ReportPresenter, ReportSource
from watchtower.services.fairness_send import fetch_report, last_complete_week

from ..container import Container
from ..deps import ContainerDep
from .status_page import PageRenderer, page_response

log = logging.getLogger(__name__)
router = APIRouter(tags=["status page"])

TEAM_MAX = 253  # a namespace name's limit; a team is a label value or a namespace


class _Refused(Exception):
    def __init__(self, status: int, heading: str, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.status, self.heading, self.message, self.hint = status, heading, message, hint


def _error(request: Request, container: Container, e: _Refused) -> HTMLResponse:
    renderer: PageRenderer = request.app.state.pages
    latest = str(last_complete_week(container.clock.now(), container.settings.fairness.timezone))
    html = renderer.render_page(
        "fairness_error.html", {"heading": e.heading, "message": e.message, "hint": e.hint, "latest": latest}
    )
    return page_response(html, status_code=e.status)


def _parts(container: Container) -> tuple[ReportSource, ReportPresenter]:
    if container.report_source is None or container.report_presenter is None:
        raise _Refused(
            404,
            "No fairness report here",
            "This service offers no fairness report.",
            "It needs `fairness.enabled` and the report's history (the state store and Prometheus).",
        )
    return container.report_source, container.report_presenter


async def _report(container: Container, week_text: str, team: str | None) -> FairnessReport:
    source, _ = _parts(container)
    try:
        week = IsoWeek.parse(week_text)
    except ValueError as e:
        raise _Refused(400, "Not a week", str(e)) from None
    if team is not None and (not team.strip() or len(team) > TEAM_MAX):
        raise _Refused(400, "Not a team", f"a team name is 1 to {TEAM_MAX} characters")
    start, _ = week.bounds(ZoneInfo(container.settings.fairness.timezone))
    if start > container.clock.now():
        raise _Refused(404, "Not yet", f"the week {week} has not begun")
    try:
        report = await fetch_report(source, week, team)
    except PromReadError as e:
        raise _Refused(
            503, "Prometheus did not answer", f"the report of {week} needs Prometheus: {e}"
        ) from None
    except LookupError as e:
        raise _Refused(404, "No such report", str(e)) from None
    if team is not None and report.team(team) is None:
        raise _Refused(404, "No such team", f"no team named {team!r} had work in {week}")
    return report


@router.get("/reports/fairness/{week}", response_class=HTMLResponse, include_in_schema=False)
async def fairness_page(
    request: Request,
    container: ContainerDep,
    week: str,
    team: Annotated[str | None, Query(description="one team's report")] = None,
) -> HTMLResponse:
    try:
        report = await _report(container, week, team)
        _, presenter = _parts(container)
    except _Refused as e:
        return _error(request, container, e)
    teams = [team] if team is not None else None
    links = (
        [("status page", "/"), ("whole report", f"/reports/fairness/{report.week}")]
        if team
        else [("status page", "/")]
    )
    if (replayed := container.week_replays.get(str(report.week))) is not None:
        links.append((f"replay of {report.week}", replayed))
    # Charts take a good fraction of a second to draw: off the loop, which serves the API meanwhile.
    html = await asyncio.to_thread(presenter.page, report, teams=teams, links=links)
    return page_response(html)


@router.get("/reports/fairness/{week}/charts/{name}.png", include_in_schema=False)
async def fairness_chart(
    request: Request,
    container: ContainerDep,
    week: str,
    name: str,
    team: Annotated[str | None, Query(description="one team's chart")] = None,
) -> Response:
    try:
        report = await _report(container, week, team)
        _, presenter = _parts(container)
    except _Refused as e:
        return _error(request, container, e)
    if team is not None:
        report = dataclasses.replace(report, teams=tuple(t for t in report.teams if t.team == team))
    png = await asyncio.to_thread(presenter.chart, report, name)
    if png is None:
        return _error(
            request,
            container,
            _Refused(404, "No such chart", f"no chart named {name!r}", "shares, waits, breakdown, trend"),
        )
    return Response(png, media_type="image/png", headers={"X-Content-Type-Options": "nosniff"})
