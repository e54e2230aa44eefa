"""The alerts and silences API over real HTTP (uvicorn on 127.0.0.1) with a token guard."""

from __future__ import annotations

import asyncio
import secrets

import httpx
import uvicorn
from fastapi import FastAPI, Header, HTTPException

from tests.alerting.helpers import T0, Clock, pending, settings, snapshot
from tests.alerting.servers import free_port
from watchtower.api.routes.alerts import build_router
from watchtower.domain.tick import Tick
from watchtower.services.alerting import build_alerting

TOKEN = "t0ken"


def require_token(authorization: str = Header("")) -> None:
    if not secrets.compare_digest(authorization, f"Bearer {TOKEN}"):
        raise HTTPException(status_code=401, detail="token required")


async def test_silences_are_created_listed_and_expired_with_the_token_only(store_backend):
    s = settings({})
    clock = Clock(T0)
    svc = build_alerting(settings=s, store=store_backend.open())
    snap, _ = snapshot([pending("job", "critical", T0 - 400)], T0, s)
    await svc.on_tick(Tick(at=T0, snapshot=snap))
    app = FastAPI()
    app.include_router(build_router(svc.admin, require_token=require_token, clock=clock))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:
        await asyncio.sleep(0.02)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as c:
            alerts = (await c.get("/api/v1/alerts")).json()
            assert [a["labels"]["alertname"] for a in alerts] == ["WorkloadWaitWarning"]
            assert alerts[0]["state"] == "firing" and alerts[0]["silencedBy"] == []
            body = {
                "matchers": [{"name": "workload", "value": "job"}],
                "endsAt": "2025-10-09T12:00:00Z",
                "createdBy": "oncall",
                "comment": "known",
            }
            assert (await c.post("/api/v1/silences", json=body)).status_code == 401
            r = await c.post("/api/v1/silences", json=body, headers={"authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 201, r.text
            sid = r.json()["silenceID"]
            alerts = (await c.get("/api/v1/alerts")).json()
            assert alerts[0]["silencedBy"] == [sid]
            bad = {**body, "matchers": [{"name": "workload", "value": "(", "isRegex": True}]}
            r = await c.post("/api/v1/silences", json=bad, headers={"authorization": f"Bearer {TOKEN}"})
            assert r.status_code == 422 and "regular expression" in r.json()["detail"]
            assert (await c.delete(f"/api/v1/silences/{sid}")).status_code == 401
            r = await c.delete(f"/api/v1/silences/{sid}", headers={"authorization": f"Bearer {TOKEN}"})
            assert r.json()["status"]["state"] == "expired"
            assert (await c.get("/api/v1/alerts")).json()[0]["silencedBy"] == []
            assert (await c.get("/api/v1/silences")).json()[0]["createdBy"] == "oncall"
    finally:
        server.should_exit = True
        await task
