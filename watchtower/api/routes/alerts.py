"""Alerts, silences and receivers: `/api/v1/alerts` (list), `/api/v1/silences` (list, create, expire),
`/api/v1/receivers` (list, with the integrations disabled after a 410 Gone; enable again). Changing
anything needs the token."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

import orjson
from fastapi import APIRouter, Depends, HTTPException, Response
from pydantic import BaseModel, ConfigDict, Field

from watchtower.domain.alerts.integration import Integration
from watchtower.domain.alerts.matchers import Matcher, MatcherError
from watchtower.domain.alerts.model import TrackedAlert
from watchtower.domain.alerts.muting import Muted
from watchtower.domain.alerts.outbox import DisabledIntegration
from watchtower.domain.alerts.payload import rfc3339
from watchtower.domain.alerts.silences import Silence, SilenceError
from watchtower.ports import Clock
from watchtower.services.alerting import AlertAdmin

from .. import schemas


class MatcherIn(BaseModel):
    """Alertmanager's API form: name, value, isRegex, isEqual."""

    model_config = ConfigDict(extra="forbid")
    name: str
    value: str
    isRegex: bool = False
    isEqual: bool = True


class SilenceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    matchers: list[MatcherIn] = Field(min_length=1)
    startsAt: datetime | None = None
    endsAt: datetime
    createdBy: str = Field(min_length=1, max_length=200)
    comment: str = Field(min_length=1, max_length=2000)


def silence_dict(s: Silence, now: float) -> dict[str, Any]:
    return {
        "id": s.id,
        "status": {"state": s.state(now).value},
        "matchers": [
            {
                "name": m.name,
                "value": m.value,
                "isRegex": m.op.value in ("=~", "!~"),
                "isEqual": m.op.value in ("=", "=~"),
            }
            for m in s.matchers
        ],
        "startsAt": rfc3339(s.starts_at),
        "endsAt": rfc3339(s.ends_at),
        "createdBy": s.created_by,
        "comment": s.comment,
        "createdAt": rfc3339(s.created_at),
        "updatedAt": rfc3339(s.updated_at),
    }


def alert_dict(a: TrackedAlert, muted: Muted) -> dict[str, Any]:
    return {
        "fingerprint": a.fingerprint,
        "state": a.state.value,
        "labels": dict(a.labels),
        "annotations": dict(a.annotations),
        "activeAt": rfc3339(a.active_at),
        "startsAt": rfc3339(a.fired_at) if a.fired_at is not None else None,
        "endsAt": rfc3339(a.resolved_at) if a.resolved_at is not None else None,
        "silencedBy": list(muted.silenced_by),
        "inhibitedBy": list(muted.inhibited_by),
    }


def receiver_dict(
    name: str, integrations: list[tuple[Integration, DisabledIntegration | None]]
) -> dict[str, Any]:
    return {
        "name": name,
        "integrations": [
            {
                "id": i.key,
                "type": i.id.kind,
                "disabled": d is not None,
                "disabledReason": d.reason if d is not None else None,
                "disabledAt": rfc3339(d.at) if d is not None else None,
            }
            for i, d in integrations
        ],
    }


def build_router(service: AlertAdmin, *, require_token: Callable[..., None], clock: Clock) -> APIRouter:
    """Return the router; `require_token` guards the endpoints that change anything."""
    router = APIRouter(prefix="/api/v1", tags=["alerts"])

    # Declared, not validated: an alert storm lists 10,000 alerts, and models would triple the cost.
    @router.get("/alerts", response_model=list[schemas.Alert])
    def list_alerts(state: str | None = None) -> Response:
        now = clock.now()
        alerts = [
            alert_dict(a, m) for a, m in service.listed_alerts(now) if state is None or a.state.value == state
        ]
        return Response(orjson.dumps(alerts), media_type="application/json")

    @router.get("/silences", response_model=list[schemas.Silence])
    def list_silences() -> list[dict[str, Any]]:
        now = clock.now()
        return [silence_dict(s, now) for s in service.silences()]

    @router.post(
        "/silences",
        status_code=201,
        dependencies=[Depends(require_token)],
        response_model=schemas.CreatedSilence,
        responses={422: {"model": schemas.Problem}},
    )
    def create_silence(body: SilenceIn) -> dict[str, Any]:
        now = clock.now()
        try:
            matchers = [
                Matcher.of(
                    m.name,
                    ("=" if m.isEqual else "!=") if not m.isRegex else ("=~" if m.isEqual else "!~"),
                    m.value,
                )
                for m in body.matchers
            ]
            s = service.add_silence(
                matchers=matchers,
                starts_at=body.startsAt.timestamp() if body.startsAt is not None else now,
                ends_at=body.endsAt.timestamp(),
                created_by=body.createdBy,
                comment=body.comment,
                now=now,
            )
        except (MatcherError, SilenceError) as e:
            raise HTTPException(status_code=422, detail=str(e)) from None
        return {"silenceID": s.id, **silence_dict(s, now)}

    @router.delete(
        "/silences/{silence_id}",
        dependencies=[Depends(require_token)],
        response_model=schemas.Silence,
        responses={404: {"model": schemas.Problem}},
    )
    def expire_silence(silence_id: str) -> dict[str, Any]:
        now = clock.now()
        s = service.expire_silence(silence_id, now)
        if s is None:
            raise HTTPException(status_code=404, detail=f"no silence {silence_id!r}")
        return silence_dict(s, now)

    @router.get("/receivers", response_model=list[schemas.Receiver])
    def list_receivers() -> list[dict[str, Any]]:
        return [receiver_dict(name, integ) for name, integ in service.receivers()]

    @router.post(
        "/receivers/{name}/enable",
        dependencies=[Depends(require_token)],
        response_model=schemas.EnabledReceiver,
        responses={404: {"model": schemas.Problem}},
    )
    def enable_receiver(name: str) -> dict[str, Any]:
        done = service.enable_receiver(name, clock.now())
        if done is None:
            raise HTTPException(status_code=404, detail=f"no receiver {name!r}")
        listed = dict(service.receivers())
        return {"enabled": done, **receiver_dict(name, listed[name])}

    return router
