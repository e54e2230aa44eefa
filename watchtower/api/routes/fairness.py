"""The weekly fairness report as JSON (or CSV, HTML, text): `/api/v1/reports/fairness?week=2026-W47&team=T`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response

from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fairness_report import UnknownTeam

from ..deps import ContainerDep
from ..fairness.formats import FORMATS, render, unknown
from ..schemas import FairnessReport, Problem

router = APIRouter(prefix="/api/v1", tags=["reports"])


@router.get(
    "/reports/fairness",
    response_model=FairnessReport,
    responses={400: {"model": Problem}, 404: {"model": Problem}, 503: {"model": Problem}},
)
async def get_fairness_report(
    container: ContainerDep,
    week: Annotated[
        str | None, Query(description="ISO week `YYYY-Www` (default: the last complete week)")
    ] = None,
    team: Annotated[str | None, Query(description="only this team")] = None,
    format: Annotated[str, Query(description="`json`, `csv`, `html` or `text`")] = "json",
) -> Response:
    reports = container.fairness
    if reports is None:
        raise HTTPException(503, detail="the fairness report is off: set fairness.enabled and a state store")
    if format not in FORMATS:
        raise HTTPException(400, detail=unknown(format))
    now = container.clock.now()
    if week is None:
        wk = reports.default_week(now)
    else:
        try:
            wk = IsoWeek.parse(week)
        except ValueError as e:
            raise HTTPException(400, detail=str(e)) from None
    if wk.bounds(reports.tz)[0] > now:
        # As the page says: a week not begun has no report (its waits would be aged to its end).
        raise HTTPException(404, detail=f"the week {wk} has not begun")
    try:
        report = await reports.build(wk, now=now, team=team)
    except UnknownTeam as e:
        raise HTTPException(404, detail=str(e)) from None
    try:
        body, media = render(report, format, presenter=container.report_presenter)
    except ValueError as e:  # a format whose presenter this service has not got
        raise HTTPException(503, detail=str(e)) from None
    return Response(body, media_type=media)
