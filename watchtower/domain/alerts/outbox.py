"""A notification waiting in the outbox, and the key that makes a resend recognisable."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class OutboxStatus(StrEnum):
    PENDING = "pending"
    DELIVERED = "delivered"
    FAILED = "failed"  # refused for good (4xx) or out of attempts
    DISABLED = "disabled"  # its endpoint said 410 Gone


@dataclass(frozen=True, slots=True)
class OutboxMessage:
    id: int  # order of enqueueing; 0 before it is stored
    key: str  # idempotency key: the same for every attempt, sent as webhook-id / Message-ID
    integration: str  # "<receiver>/email/0", "<receiver>/webhook/1"
    group_key: str
    payload: Mapping[str, Any]
    created: float
    attempts: int = 0
    next_attempt: float = 0.0
    status: OutboxStatus = OutboxStatus.PENDING
    last_error: str = ""
    delivered_at: float | None = None


@dataclass(frozen=True, slots=True)
class DisabledIntegration:
    """An integration no longer delivered to (its endpoint answered 410 Gone), until enabled again."""

    integration: str
    reason: str
    at: float
    config: str = ""  # digest of its configuration when it was disabled


def idempotency_key(integration: str, group_key: str, at: float, fingerprints: Iterable[str]) -> str:
    """Return a key naming one notification: the same inputs always give the same key."""
    h = hashlib.sha256()
    for part in (integration, group_key, repr(at), *sorted(fingerprints)):
        h.update(part.encode())
        h.update(b"\x00")
    return "msg_" + h.hexdigest()[:32]


class Outcome(StrEnum):
    SENT = "sent"
    RETRY = "retry"  # a transient failure: network, 5xx, 408, 429, SMTP 4xx
    REJECTED = "rejected"  # refused for good: retrying would not help
    GONE = "gone"  # the endpoint no longer exists (410): stop sending to it


@dataclass(frozen=True, slots=True)
class DeliveryResult:
    outcome: Outcome
    detail: str = ""
    retry_after: float | None = None  # what the receiver asked for (Retry-After), in seconds


@dataclass(frozen=True, slots=True)
class PruneResult:
    """Rows removed by one prune of the alert store, per table."""

    silences: int
    outbox: int
    nflog: int
