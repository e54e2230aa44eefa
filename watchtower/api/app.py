"""The FastAPI application factory: no module-level app, everything comes from the container."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastapi import APIRouter, FastAPI
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .container import Container
from .routes import (
    fairness,
    fairness_history,
    fairness_page,
    fleet,
    gpu,
    health,
    metrics,
    preemptions,
    queue,
    replays,
    runbooks,
    status_page,
    workload_page,
    workloads,
)


def create_app(container: Container, *, routers: Sequence[APIRouter] = ()) -> FastAPI:
    """Return the app serving the API, /metrics, the status page, the workload pages and the runbooks;
    `routers` adds more (alerting, ...)."""
    app = FastAPI(
        title="Watchtower",
        description="The GPU job queue of a Kubernetes cluster: waits, why pending, preemptions, quota.",
        version="1",
        # The interactive docs pages load their scripts from a CDN; the schema itself is served locally.
        docs_url=None,
        redoc_url=None,
    )
    app.state.container = container
    app.state.pages = status_page.PageRenderer()
    # The queue's and a workload's bodies are composed from the forms registered now (api/schemas/queue.py).
    queue_routes, workload_routes = queue.build_router(), workloads.build_router()
    for r in (health.router, metrics.router, queue_routes, workload_routes, preemptions.router, gpu.router):
        app.include_router(r)
    for r in (fairness.router, fairness_history.router, replays.router):
        app.include_router(r)
    for r in routers:
        app.include_router(r)
    for r in (status_page.router, workload_page.router, runbooks.router, fairness_page.router, fleet.router):
        app.include_router(r)
    app.add_middleware(ReplicaHeader, identity=container.leadership.status().identity)
    return app


REPLICA_HEADER = b"x-watchtower-replica"


class ReplicaHeader:
    """Names the replica that answered (`X-Watchtower-Replica: <identity>`, its leader-election identity): behind
    a Service every replica serves reads from its own picture, and a reader can tell which one it got. Plain
    ASGI, so a response costs one list append."""

    def __init__(self, app: ASGIApp, identity: str) -> None:
        self.app = app
        self.value = identity.encode("latin-1", "replace")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def named(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers: list[Any] = list(message.get("headers", ()))
                headers.append((REPLICA_HEADER, self.value))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, named)
