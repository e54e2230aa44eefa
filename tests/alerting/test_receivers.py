"""Receivers disabled by a 410 Gone: listed over the API, enabled again with the token or by a changed
configuration, and the notifications held back meanwhile delivered in order. Real webhook receiver, real
HTTP API (uvicorn on 127.0.0.1), real SQLite store; the clock is injected."""

from __future__ import annotations

import secrets

import httpx
from fastapi import FastAPI, Header, HTTPException

from tests.alerting.helpers import SECRET, T0, Clock, pending, snapshot
from tests.alerting.servers import Receiver, serve
from tests.alerting.test_notifications import Rig, alerts_in, hook_settings
from watchtower.api.routes.alerts import build_router
from watchtower.domain.tick import Tick
from watchtower.services.alerting import build_alerting, integration_configs

TOKEN = "t0ken"
AUTH = {"authorization": f"Bearer {TOKEN}"}


def require_token(authorization: str = Header("")) -> None:
    if not secrets.compare_digest(authorization, f"Bearer {TOKEN}"):
        raise HTTPException(status_code=401, detail="token required")


async def test_a_receiver_gone_410_is_listed_enabled_with_the_token_and_then_gets_what_was_held(
    store_backend,
):
    receiver = Receiver(SECRET)
    try:
        clock = Clock()
        rig = Rig(hook_settings(receiver.url, group_by=["alertname", "workload"]), store_backend, clock)
        receiver.script = [(410, {})]
        first = [pending("first", "critical", T0 - 6 * 60)]
        await rig.tick(first, T0)
        await rig.tick(first, T0 + 30)  # 410: disabled, its message held
        both = first + [pending("second", "critical", T0 - 6 * 60 + 60)]
        await rig.tick(both, T0 + 60)
        await rig.tick(both, T0 + 90)  # the second group is stored, not sent
        assert len(receiver.requests) == 1
        assert {a.alertname for a, _ in rig.svc.admin.listed_alerts(T0 + 90)} >= {"WatchtowerReceiverGone"}

        app = FastAPI()
        app.include_router(build_router(rig.svc.admin, require_token=require_token, clock=clock))
        async with serve(app) as base, httpx.AsyncClient(base_url=base) as c:
            (hook,) = (await c.get("/api/v1/receivers")).json()
            assert hook["name"] == "hook"
            (integ,) = hook["integrations"]
            assert integ["id"] == "hook/webhook/0" and integ["type"] == "webhook" and integ["disabled"]
            assert integ["disabledReason"].startswith("410 Gone at hook/webhook/0")
            assert integ["disabledAt"] == "2025-10-09T08:53:50.000Z"

            assert (await c.post("/api/v1/receivers/hook/enable")).status_code == 401
            assert (await c.post("/api/v1/receivers/nobody/enable", headers=AUTH)).status_code == 404
            r = await c.post("/api/v1/receivers/hook/enable", headers=AUTH)
            assert r.status_code == 200, r.text
            assert r.json()["enabled"] == ["hook/webhook/0"]
            assert r.json()["integrations"][0]["disabled"] is False
            # Enabling what is not disabled changes nothing.
            assert (await c.post("/api/v1/receivers/hook/enable", headers=AUTH)).json()["enabled"] == []

        clock.t = T0 + 120
        await rig.worker.drain()
        # (The self-alert about the 410 went to the same receiver; only the workload groups matter here.)
        workload = [r for r in receiver.requests[1:] if "workload" in r["body"]["commonLabels"]]
        got = [alerts_in(r) for r in workload]
        assert got == [
            [("WorkloadWaitWarning", "first", "firing")],  # the one the 410 held back, first
            [("WorkloadWaitWarning", "second", "firing")],
        ]
        assert workload[0]["id"] == receiver.requests[0]["id"]  # the same message, the same id
        await rig.tick(both, T0 + 150)
        assert "WatchtowerReceiverGone" not in {
            a.alertname for a, _ in rig.svc.admin.listed_alerts(T0 + 150) if a.state.value == "firing"
        }
        await rig.close()
    finally:
        receiver.stop()


async def test_a_changed_configuration_enables_the_integration_again_and_an_unchanged_one_does_not(
    store_backend,
):
    old = hook_settings("http://127.0.0.1:9/old-hook")
    store = store_backend.open()
    store.disable(
        "hook/webhook/0", "410 Gone", T0, config=integration_configs(old.alerting)["hook/webhook/0"]
    )
    snap, _ = snapshot([pending("job", "low", T0 - 60)], T0, old)

    same = build_alerting(settings=old, store=store)
    await same.on_tick(Tick(at=T0, snapshot=snap))
    assert store.disabled().keys() == {"hook/webhook/0"}

    moved = hook_settings("http://127.0.0.1:9/new-hook")
    changed = build_alerting(settings=moved, store=store)
    await changed.on_tick(Tick(at=T0 + 10, snapshot=snap))
    assert store.disabled() == {}
    store.close()


def test_a_new_secret_counts_as_a_changed_configuration():
    a = integration_configs(hook_settings("http://127.0.0.1:9/hook").alerting)
    other_secret = "whsec_" + "QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVo="
    s = hook_settings("http://127.0.0.1:9/hook")
    b_cfg = s.alerting.model_copy(
        update={
            "receivers": [
                s.alerting.receivers[0].model_copy(
                    update={
                        "webhooks": [
                            s.alerting.receivers[0].webhooks[0].model_copy(update={"secret": other_secret})
                        ]
                    }
                )
            ]
        }
    )
    assert integration_configs(b_cfg) != a
    assert integration_configs(s.alerting) == a
