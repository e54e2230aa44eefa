"""Liveness and readiness."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from ..deps import WatcherDep
from ..schemas import Health, Readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
def healthz() -> Health:
    return Health(status="ok")


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
def readyz(watcher: WatcherDep) -> JSONResponse:
    """200 when every kind has been listed and the picture is fresh; the body says how stale, per kind."""
    r = watcher.readiness()
    body = Readiness(ready=r.ready, problems=list(r.problems), **r.detail)
    # exclude_unset: a kind's `source` stays absent, not null, when the source reports nothing for it.
    return JSONResponse(body.model_dump(exclude_unset=True), status_code=200 if r.ready else 503)
