from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass

import httpx
import pytest
import uvicorn
from fastapi import APIRouter, Depends, FastAPI
from pydantic import SecretStr

from tests.fixtures.scenario import Cluster, ManualClock, ReplaySource, demo_cluster, list_everything
from watchtower.api.app import create_app
from watchtower.api.container import Container
from watchtower.api.deps import require_token
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.config.model import ServerConfig
from watchtower.runtime.sockets import bind

TOKEN = "s3cret-token-for-tests"


@dataclass
class Service:
    container: Container
    app: FastAPI
    source: ReplaySource
    clock: ManualClock


def mutation_router() -> APIRouter:
    """A stand-in for the mutating routers others add (silences): it only needs the token guard."""
    r = APIRouter(prefix="/api/v1")

    @r.post("/echo", dependencies=[Depends(require_token)])
    def echo() -> dict[str, bool]:
        return {"changed": True}

    return r


def make_service(
    *, token: str | None = TOKEN, evaluate: bool = True, listed: bool = True, cluster: Cluster | None = None
) -> Service:
    """Return the service on `cluster` (else the demo cluster), listed and evaluated at NOW unless told."""
    clock = ManualClock()
    source = ReplaySource(cluster if cluster is not None else demo_cluster())
    settings = Settings().model_copy(
        update={"server": ServerConfig(api_token=SecretStr(token) if token is not None else None)}
    )
    container = build_container(settings, clock=clock, source_health=source.feed_health, source_name="replay")
    if listed:
        list_everything(container.queue_tracker, source.cluster)
        source.listed = set(source.cluster.objects)
    if evaluate:
        container.queue_tracker.evaluate(clock.now())
    return Service(container, create_app(container, routers=[mutation_router()]), source, clock)


@pytest.fixture
def service() -> Service:
    return make_service()


@pytest.fixture
async def client(service: Service) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=service.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://watchtower.test") as c:
        yield c


@contextlib.contextmanager
def live_server(app: FastAPI, sock: socket.socket | None = None) -> Iterator[str]:
    """Serve the app with a real uvicorn on `sock` (else 127.0.0.1, a free port) in a thread; yield its base
    URL."""
    sock = sock if sock is not None else bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))
    thread = threading.Thread(target=lambda: asyncio.run(server.serve(sockets=[sock])), daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(15)
        sock.close()


@pytest.fixture
def live(service: Service) -> Iterator[str]:
    with live_server(service.app) as url:
        yield url
