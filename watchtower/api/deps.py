"""Typed dependencies shared by the routers: the container, the latest tick, the API token."""

from __future__ import annotations

import asyncio
import secrets
from typing import Annotated

from fastapi import Depends, HTTPException, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from watchtower.domain.tick import Tick
from watchtower.services.queue_tracker import QueueTracker

from .container import Container
from .documents import QueueDocuments


async def get_container(request: Request) -> Container:
    container: Container = request.app.state.container
    return container


ContainerDep = Annotated[Container, Depends(get_container)]


async def get_queue_tracker(container: ContainerDep) -> QueueTracker:
    return container.queue_tracker


QueueTrackerDep = Annotated[QueueTracker, Depends(get_queue_tracker)]


async def get_tick(tracker: QueueTrackerDep) -> Tick:
    tick = tracker.latest
    if tick is None:
        raise HTTPException(
            status_code=503,
            detail="the queue has not been evaluated yet: the cluster is still being listed",
            headers={"Retry-After": "5"},
        )
    return tick


TickDep = Annotated[Tick, Depends(get_tick)]


async def get_documents(container: ContainerDep, tick: TickDep) -> QueueDocuments:
    # Most requests find the tick's documents built (the prebuild after each tick): answered on the loop
    # with no thread hop. Building them takes up to a second, so only then does the request go to a thread.
    cur = container.documents.current
    if cur is not None and cur.tick is tick:
        return cur
    return await asyncio.to_thread(container.documents.for_tick, tick)


DocumentsDep = Annotated[QueueDocuments, Depends(get_documents)]

_bearer = HTTPBearer(auto_error=False, description="server.api_token")


def require_token(
    container: ContainerDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> None:
    """Guard a mutating endpoint: the caller must present `Authorization: Bearer <server.api_token>`."""
    token = container.settings.server.api_token
    if token is None:
        raise HTTPException(
            status_code=403,
            detail="changes through the API are disabled: no server.api_token is configured",
        )
    expected = token.get_secret_value().encode()
    given = credentials.credentials.encode() if credentials is not None else b""
    if not given or not secrets.compare_digest(given, expected):
        raise HTTPException(
            status_code=401,
            detail="a valid bearer token is required (Authorization: Bearer <token>)",
            headers={"WWW-Authenticate": "Bearer"},
        )


TokenDep = Depends(require_token)
