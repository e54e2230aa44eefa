"""A week's fairness history for the fleet report of another Watchtower:
`GET /api/v1/fairness/history?week=2026-W47`, behind the API token since it names workloads of every team."""

from __future__ import annotations

from typing import Annotated

import msgspec
from fastapi import APIRouter, HTTPException, Query, Response

from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fairness_history import history_week

from ..deps import ContainerDep, TokenDep
from ..schemas import FairnessHistory, Problem

router = APIRouter(prefix="/api/v1", tags=["reports"])


@router.get(
    "/fairness/history",
    dependencies=[TokenDep],
    response_model=FairnessHistory,
    responses={
        200: {
            "description": "the week's wait episodes (from the trend's first week), preemptions, "
            "incidents and recorded hours"
        },
        400: {"model": Problem},
        401: {"model": Problem},
        403: {"model": Problem},
        503: {"model": Problem},
    },
)
async def get_fairness_history(
    container: ContainerDep,
    week: Annotated[str, Query(description="ISO week `YYYY-Www`")],
) -> Response:
    reports = container.fairness
    if reports is None:
        raise HTTPException(503, detail="the fairness history is off: set fairness.enabled and a state store")
    try:
        wk = IsoWeek.parse(week)
    except ValueError as e:
        raise HTTPException(400, detail=str(e)) from None
    got = await history_week(reports, wk)
    return Response(msgspec.json.encode(got), media_type="application/json")
