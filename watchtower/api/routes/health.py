"""Liveness and readiness, each saying whether this replica leads."""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from watchtower.ports import Fence

from ..deps import ContainerDep, QueueTrackerDep
from ..schemas import Health, LeaderStatus, Readiness

router = APIRouter(tags=["health"])


def _leadership(fence: Fence) -> LeaderStatus:
    s = fence.status()
    return LeaderStatus(
        enabled=s.enabled, role=s.role, identity=s.identity, holder=s.holder, transitions=s.transitions
    )


@router.get("/healthz", response_model=Health)
async def healthz(container: ContainerDep) -> Health:
    return Health(status="ok", leadership=_leadership(container.leadership))


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness}})
async def readyz(container: ContainerDep, tracker: QueueTrackerDep) -> JSONResponse:
    """200 when every kind has been listed and the picture is fresh (leader or follower alike); the body
    says how stale, per kind, and who leads."""
    r = tracker.readiness()
    body = Readiness(
        ready=r.ready, problems=list(r.problems), leadership=_leadership(container.leadership), **r.detail
    )
    # exclude_unset: a kind's `source` stays absent, not null, when the source reports nothing for it.
    return JSONResponse(body.model_dump(exclude_unset=True), status_code=200 if r.ready else 503)
