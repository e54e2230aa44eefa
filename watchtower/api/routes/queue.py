"""The queue: every workload Watchtower tracks, waiting first, with why it waits."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query, Response

from watchtower.domain.forms import registry
from watchtower.domain.queue import WorkloadState

from ..deps import ContainerDep, DocumentsDep
from ..documents import DEFAULT_LIMIT, MAX_LIMIT
from ..schemas import Problem
from ..schemas.queue import queue_models

STATES = frozenset(s.value for s in WorkloadState)
WAITING = frozenset({"pending", "partial", "quota_blocked"})


async def get_queue(
    container: ContainerDep,
    docs: DocumentsDep,
    tier: Annotated[list[str] | None, Query(description="repeatable")] = None,
    namespace: Annotated[list[str] | None, Query(description="repeatable")] = None,
    team: Annotated[list[str] | None, Query(description="repeatable")] = None,
    state: Annotated[
        list[str] | None,
        Query(description="pending, partial, quota_blocked, gated, running, or waiting (the first three)"),
    ] = None,
    offset: Annotated[int, Query(ge=0)] = 0,
    limit: Annotated[int, Query(ge=0, le=MAX_LIMIT, description="page size")] = DEFAULT_LIMIT,
) -> Response:
    tiers = frozenset(tier or ())
    known = {t.name for t in container.queue_tracker.policy.tiers.tiers}
    unknown = sorted(tiers - known)
    if unknown:
        raise HTTPException(422, f"unknown tier {unknown[0]!r}; tiers are: {', '.join(sorted(known))}")
    states: set[str] = set()
    for s in state or ():
        if s == "waiting":
            states |= WAITING
        elif s in STATES:
            states.add(s)
        else:
            raise HTTPException(422, f"unknown state {s!r}; states are: {', '.join(sorted(STATES))}, waiting")
    body = docs.queue_json(
        tiers=tiers,
        namespaces=frozenset(namespace or ()),
        teams=frozenset(team or ()),
        states=frozenset(states),
        offset=offset,
        limit=limit,
    )
    return Response(body, media_type="application/json")


def build_router() -> APIRouter:
    """Return the queue's routes, their body the `Queue` model of the forms registered now (a form's sections
    are in /openapi.json; api/schemas/queue.py)."""
    queue, _ = queue_models(registry.FORMS)
    router = APIRouter(prefix="/api/v1", tags=["queue"])
    router.add_api_route(
        "/queue", get_queue, methods=["GET"], response_model=queue, responses={422: {"model": Problem}}
    )
    return router
