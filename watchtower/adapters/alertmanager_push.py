"""The push into an Alertmanager with httpx: `POST <url>/api/v2/alerts`, one replica per sender, as
Prometheus's notifier sends (every replica is sent every alert; a load balancer in between would split
them and break Alertmanager's deduplication across the cluster).

One attempt per call; the outbox retries. A firing alert's `endsAt` is set here, from the moment the
request leaves (`validFor` after it). A message that waited long in the outbox (the Alertmanager was down)
no longer says anything about its firing alerts — later messages restate them — so only its resolved
alerts are sent: replaying stale "firing" would re-open alerts that resolved meanwhile.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from watchtower.domain.alerts.gotext import rfc3339nano
from watchtower.domain.alerts.outbox import DeliveryResult, OutboxMessage, Outcome
from watchtower.domain.alerts.push import VALID_FOR

RETRY_STATUSES = frozenset({408, 429})


def wire_alerts(msg: OutboxMessage, *, now: float, stale_after: float) -> list[dict[str, Any]]:
    """Return the alerts of a push message as they go out at `now`."""
    stale = now - msg.created > stale_after
    out = []
    for a in msg.payload.get("alerts", []):
        valid_for = a.get(VALID_FOR)
        if valid_for is None:
            out.append(a)
        elif not stale:
            doc = {k: v for k, v in a.items() if k != VALID_FOR}
            doc["endsAt"] = rfc3339nano(now + float(valid_for))
            out.append(doc)
    return out


class AlertmanagerSender:
    def __init__(
        self, *, url: str, client: httpx.AsyncClient, stale_after: float, timeout: float = 10.0
    ) -> None:
        self.endpoint = url.rstrip("/") + "/api/v2/alerts"
        self.client, self.stale_after, self.timeout = client, stale_after, timeout

    async def send(self, msg: OutboxMessage, *, now: float) -> DeliveryResult:
        alerts = wire_alerts(msg, now=now, stale_after=self.stale_after)
        if not alerts:
            return DeliveryResult(Outcome.SENT, "superseded: its firing alerts were sent again since")
        try:
            r = await self.client.post(
                self.endpoint,
                content=orjson.dumps(alerts),
                headers={"content-type": "application/json", "user-agent": "watchtower"},
                timeout=self.timeout,
            )
        except httpx.HTTPError as e:
            return DeliveryResult(Outcome.RETRY, f"{type(e).__name__}: {e}")
        if 200 <= r.status_code < 300:
            return DeliveryResult(Outcome.SENT, f"HTTP {r.status_code}: {len(alerts)} alerts")
        detail = f"HTTP {r.status_code}: {r.text[:200]}"
        if r.status_code >= 500 or r.status_code in RETRY_STATUSES:
            return DeliveryResult(Outcome.RETRY, detail)
        return DeliveryResult(Outcome.REJECTED, detail)
