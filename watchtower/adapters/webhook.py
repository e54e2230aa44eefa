"""Webhook delivery with httpx: Alertmanager's v4 JSON as Alertmanager writes it, signed with the Standard
Webhooks headers.

One attempt per call; the outbox decides when to try again. `webhook-id` is the outbox key, the same on
every attempt, so a receiver can drop a repeat.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from email.utils import parsedate_to_datetime

import httpx
import orjson

from watchtower.domain.alerts.outbox import DeliveryResult, OutboxMessage, Outcome
from watchtower.domain.alerts.payload import slack_payload
from watchtower.domain.owners.payload import is_owner_notice, slack_notice

RETRY_STATUSES = frozenset({408, 429})

# What Go's encoding/json escapes beyond orjson: <, > and & (HTML-safe) and U+2028, U+2029. Each byte
# sequence occurs only inside strings, so replacing them in the encoded bytes is exact.
_GO_ESCAPES = (
    (b"<", b"\\u003c"),
    (b">", b"\\u003e"),
    (b"&", b"\\u0026"),
    ("\u2028".encode(), b"\\u2028"),
    ("\u2029".encode(), b"\\u2029"),
)


def go_json(doc: object) -> bytes:
    """Return `doc` encoded as Go's json.Encoder writes it (Alertmanager's webhook notifier): compact, keys
    in the order given, HTML characters escaped, a newline at the end."""
    body = orjson.dumps(doc)
    for raw, escaped in _GO_ESCAPES:
        if raw in body:
            body = body.replace(raw, escaped)
    return body + b"\n"


def signing_key(secret: str) -> bytes:
    """Return the HMAC key of a `whsec_<base64>` secret."""
    return base64.b64decode(secret.removeprefix("whsec_"))


def sign(key: bytes, msg_id: str, timestamp: int, body: bytes) -> str:
    """Return the `webhook-signature` value: `v1,<base64 HMAC-SHA256 of id.timestamp.body>`."""
    mac = hmac.new(key, f"{msg_id}.{timestamp}.".encode() + body, hashlib.sha256).digest()
    return "v1," + base64.b64encode(mac).decode()


def retry_after(value: str | None, *, now: float) -> float | None:
    """Return the seconds a Retry-After header asks for (delta-seconds or an HTTP date); None if unreadable."""
    if not value:
        return None
    v = value.strip()
    if v.isdigit():
        return float(v)
    try:
        return max(0.0, parsedate_to_datetime(v).timestamp() - now)
    except (TypeError, ValueError, IndexError):
        return None


class WebhookSender:
    def __init__(
        self,
        *,
        url: str,
        client: httpx.AsyncClient,
        secret: str | None = None,
        slack_compatible: bool = False,
        timeout: float = 10.0,
        cluster_label: str | None = None,
    ) -> None:
        self.url, self.client = url, client
        self.key = signing_key(secret) if secret else None
        self.slack = slack_compatible
        self.timeout = timeout
        # A Slack body has no labels: its title names the cluster the alerts carry as this label.
        self.cluster_label = cluster_label

    def request_parts(self, msg: OutboxMessage, *, now: float) -> tuple[bytes, dict[str, str]]:
        if is_owner_notice(msg.payload):
            # An owner notice: its own JSON, or Slack's `text` body where the receiver is Slack-compatible.
            body = orjson.dumps(slack_notice(msg.payload)) if self.slack else go_json(msg.payload)
        else:
            body = (
                orjson.dumps(slack_payload(msg.payload, cluster_label=self.cluster_label))
                if self.slack
                else go_json(msg.payload)
            )
        ts = int(now)
        headers = {
            "content-type": "application/json",
            "user-agent": "watchtower",
            "webhook-id": msg.key,
            "webhook-timestamp": str(ts),
        }
        if self.key is not None:
            headers["webhook-signature"] = sign(self.key, msg.key, ts, body)
        return body, headers

    async def send(self, msg: OutboxMessage, *, now: float) -> DeliveryResult:
        body, headers = self.request_parts(msg, now=now)
        try:
            r = await self.client.post(self.url, content=body, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as e:
            return DeliveryResult(Outcome.RETRY, f"{type(e).__name__}: {e}")
        if 200 <= r.status_code < 300:
            return DeliveryResult(Outcome.SENT, f"HTTP {r.status_code}")
        detail = f"HTTP {r.status_code}: {r.text[:200]}"
        if r.status_code == 410:
            return DeliveryResult(Outcome.GONE, detail)
        if r.status_code >= 500 or r.status_code in RETRY_STATUSES:
            return DeliveryResult(Outcome.RETRY, detail, retry_after(r.headers.get("retry-after"), now=now))
        return DeliveryResult(Outcome.REJECTED, detail)
