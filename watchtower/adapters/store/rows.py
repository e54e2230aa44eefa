"""Rows of the alert store and the domain records they hold, the same for every database."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.model import AlertState, TrackedAlert
from watchtower.domain.alerts.outbox import OutboxMessage, OutboxStatus
from watchtower.domain.alerts.silences import Silence

# The notification-log entry of a group that was told everything resolved.
NOTHING_FIRING = orjson.dumps([])


def new_message_row(msg: OutboxMessage) -> tuple[Any, ...]:
    """Return the values of a new outbox row, for (key, integration, group_key, payload, created,
    next_attempt, status): pending, not tried yet."""
    return (
        msg.key,
        msg.integration,
        msg.group_key,
        orjson.dumps(msg.payload),
        msg.created,
        msg.next_attempt,
        OutboxStatus.PENDING.value,
    )


def message(r: Sequence[Any]) -> OutboxMessage:
    """Return the message of an outbox row read as (id, key, integration, group_key, payload, created,
    attempts, next_attempt, status, last_error, delivered_at)."""
    return OutboxMessage(
        id=r[0],
        key=r[1],
        integration=r[2],
        group_key=r[3],
        payload=orjson.loads(r[4]),
        created=r[5],
        attempts=r[6],
        next_attempt=r[7],
        status=OutboxStatus(r[8]),
        last_error=r[9],
        delivered_at=r[10],
    )


def alert_body(a: TrackedAlert) -> dict[str, Any]:
    body: dict[str, Any] = {
        "fingerprint": a.fingerprint,
        "labels": dict(a.labels),
        "annotations": dict(a.annotations),
        "state": a.state.value,
        "active_at": a.active_at,
        "last_seen": a.last_seen,
        "fired_at": a.fired_at,
        "resolved_at": a.resolved_at,
    }
    if a.unkeyed is not None:  # absent otherwise: rows stay as older versions wrote and read them
        body["unkeyed"] = a.unkeyed
    return body


def alert(d: Mapping[str, Any]) -> TrackedAlert:
    return TrackedAlert(
        d["fingerprint"],
        d["labels"],
        d["annotations"],
        AlertState(d["state"]),
        d["active_at"],
        d["last_seen"],
        d.get("fired_at"),
        d.get("resolved_at"),
        d.get("unkeyed"),
    )


def silence_body(s: Silence) -> dict[str, Any]:
    return {
        "id": s.id,
        "matchers": [[m.name, m.op.value, m.value] for m in s.matchers],
        "starts_at": s.starts_at,
        "ends_at": s.ends_at,
        "created_by": s.created_by,
        "comment": s.comment,
        "created_at": s.created_at,
        "updated_at": s.updated_at,
    }


def silence(d: Mapping[str, Any]) -> Silence:
    return Silence(
        d["id"],
        tuple(Matcher.stored(n, o, v) for n, o, v in d["matchers"]),
        d["starts_at"],
        d["ends_at"],
        d["created_by"],
        d["comment"],
        d["created_at"],
        d["updated_at"],
    )
