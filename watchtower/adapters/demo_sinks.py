"""Receivers for the demo: an SMTP sink (aiosmtpd) and a webhook sink that checks Standard Webhooks signatures.

Both listen on 127.0.0.1 only, on free ports unless told otherwise, and keep what they received in memory
(the newest `keep`), so the demo can show that notifications really left Watchtower. The webhook sink's
HTTP server also answers `GET /` with everything received, emails included, as JSON.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import secrets
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import asdict, dataclass
from email import message_from_bytes
from email import policy as email_policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from watchtower.domain.owners.payload import is_owner_notice

log = logging.getLogger(__name__)

TOLERANCE = 300.0  # seconds a webhook-timestamp may differ from the sink's clock, as the spec suggests
MAX_BODY = 4 * 1024 * 1024


def new_secret() -> str:
    """Return a fresh Standard Webhooks secret: `whsec_` + base64 of 24 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def verify_signature(
    secret: str, headers: dict[str, str], body: bytes, *, now: float, tolerance: float = TOLERANCE
) -> str:
    """Return "" when the Standard Webhooks headers sign `body` with `secret`, else why they do not."""
    msg_id, ts, sigs = (headers.get(h, "") for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and ts and sigs):
        return "missing webhook-id, webhook-timestamp or webhook-signature"
    try:
        stamp = int(ts)
    except ValueError:
        return f"webhook-timestamp {ts[:40]!r} is not an integer"
    if abs(now - stamp) > tolerance:
        return f"webhook-timestamp is {now - stamp:+.0f}s off (tolerance {tolerance:g}s)"
    key = base64.b64decode(secret.removeprefix("whsec_"))
    expected = base64.b64encode(
        hmac.new(key, f"{msg_id}.{stamp}.".encode() + body, hashlib.sha256).digest()
    ).decode()
    for sig in sigs.split():
        version, _, value = sig.partition(",")
        if version == "v1" and hmac.compare_digest(value, expected):
            return ""
    return "no v1 signature matches"


@dataclass(frozen=True, slots=True)
class ReceivedEmail:
    received_at: float
    mail_from: str
    rcpt_to: list[str]
    subject: str
    message_id: str
    idempotency_key: str
    size: int


@dataclass(frozen=True, slots=True)
class ReceivedWebhook:
    received_at: float
    webhook_id: str
    verified: bool
    problem: str  # why the signature was refused; "" when verified
    status: str  # "firing" / "resolved" from the Alertmanager body
    alerts: int
    group_key: str
    alertnames: list[str]
    workloads: list[str]  # namespace/workload of the alerts that name one


class SmtpSink:
    """An in-process SMTP server (aiosmtpd, its own thread) that accepts every message and keeps its headers."""

    def __init__(self, *, port: int = 0, keep: int = 200) -> None:
        self.port = port
        self.received: deque[ReceivedEmail] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._controller: Any = None

    async def handle_DATA(self, server: Any, session: Any, envelope: Any) -> str:  # aiosmtpd handler hook
        raw = envelope.content if isinstance(envelope.content, bytes) else envelope.content.encode()
        msg = message_from_bytes(raw, policy=email_policy.default)
        got = ReceivedEmail(
            received_at=time.time(),
            mail_from=str(envelope.mail_from),
            rcpt_to=[str(r) for r in envelope.rcpt_tos],
            subject=str(msg.get("Subject", "")),
            message_id=str(msg.get("Message-ID", "")),
            idempotency_key=str(msg.get("X-Watchtower-Idempotency-Key", "")),
            size=len(raw),
        )
        with self._lock:
            self.received.append(got)
        log.info("SMTP sink: %s → %s", got.subject, ", ".join(got.rcpt_to))
        return "250 Message accepted for delivery"

    def start(self) -> SmtpSink:
        from aiosmtpd.controller import Controller

        if not self.port:
            self.port = _free_port()
        self._controller = Controller(self, hostname="127.0.0.1", port=self.port)
        self._controller.start()
        return self

    def stop(self) -> None:
        if self._controller is not None:
            self._controller.stop()
            self._controller = None

    def emails(self) -> list[ReceivedEmail]:
        with self._lock:
            return list(self.received)


class WebhookSink:
    """An HTTP receiver on 127.0.0.1: `POST /hook` checks the signature (204 or 401), `GET /` lists all."""

    def __init__(
        self,
        *,
        secret: str,
        port: int = 0,
        now: Callable[[], float] = time.time,
        smtp: SmtpSink | None = None,
        keep: int = 200,
    ) -> None:
        self.secret = secret
        self.now = now  # the sender's clock: a simulated cluster signs with simulated time
        self.smtp = smtp
        self.received: deque[ReceivedWebhook] = deque(maxlen=keep)
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", port), self._handler())
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(target=self._server.serve_forever, name="webhook-sink", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def hook_url(self) -> str:
        return f"{self.url}/hook"

    def start(self) -> WebhookSink:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def webhooks(self) -> list[ReceivedWebhook]:
        with self._lock:
            return list(self.received)

    def receive(self, headers: dict[str, str], body: bytes) -> ReceivedWebhook:
        problem = verify_signature(self.secret, headers, body, now=self.now())
        status, group = "", ""
        items: list[dict[str, Any]] = []
        if not problem:
            try:
                doc = json.loads(body)
                status, group = str(doc.get("status", "")), str(doc.get("groupKey", ""))
                items = [a.get("labels", {}) for a in doc.get("alerts", [])]
                if is_owner_notice(doc):  # an owner notice: its kind, and the workload it names
                    status, items = f"owner-{doc.get('kind', '')}", [doc.get("labels", {})]
            except (ValueError, AttributeError):
                problem = "body is not an Alertmanager JSON object"
        got = ReceivedWebhook(
            received_at=time.time(),
            webhook_id=headers.get("webhook-id", "")[:200],
            verified=not problem,
            problem=problem,
            status=status,
            alerts=len(items),
            group_key=group[:500],
            alertnames=sorted({str(lb.get("alertname", "")) for lb in items}),
            workloads=sorted(
                {f"{lb.get('namespace', '')}/{lb['workload']}" for lb in items if lb.get("workload")}
            ),
        )
        with self._lock:
            self.received.append(got)
        if problem:
            log.warning("webhook sink refused a delivery: %s", problem)
        return got

    def listing(self) -> dict[str, Any]:
        return {
            "webhooks": [asdict(w) for w in reversed(self.webhooks())],
            "emails": [asdict(e) for e in reversed(self.smtp.emails())] if self.smtp is not None else [],
        }

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        sink = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self, code: int, body: bytes = b"", ctype: str = "application/json") -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self) -> None:
                if self.path.split("?", 1)[0] != "/hook":
                    self._answer(404, b'{"error": "POST to /hook"}')
                    return
                try:
                    length = int(self.headers.get("Content-Length", "0"))
                except ValueError:
                    length = -1
                if not 0 <= length <= MAX_BODY:
                    self._answer(413, b'{"error": "body missing or too large"}')
                    return
                body = self.rfile.read(length)
                headers = {k.lower(): v for k, v in self.headers.items()}
                got = sink.receive(headers, body)
                if got.verified:
                    self._answer(204)
                else:
                    self._answer(401, json.dumps({"error": got.problem}).encode())

            def do_GET(self) -> None:
                if self.path.split("?", 1)[0] != "/":
                    self._answer(404, b'{"error": "GET /"}')
                    return
                self._answer(200, json.dumps(sink.listing(), indent=1).encode())

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])
