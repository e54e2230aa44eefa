"""A webhook receiver for the e2e tests and bench/failover.py: it checks Standard Webhooks signatures
itself, keeps every delivery with the time it arrived, and can answer slowly on purpose.

The signature check is written here again rather than taken from watchtower/adapters/demo_sinks.py: the
tests assert what Watchtower sends, so the oracle must not be Watchtower's own code.

`delay` makes the receiver a slow team webhook: a storm's notifications then go out one after another
for seconds, so a leader killed "in the middle" of one really has work left (test_leader_election.py).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import secrets
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def new_secret() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(24)).decode()


def signature_problem(secret: str, headers: dict[str, str], body: bytes, *, now: float) -> str:
    """Return "" when the headers sign `body` per Standard Webhooks (HMAC-SHA256 of id.timestamp.body)."""
    msg_id, ts, sigs = (headers.get(h, "") for h in ("webhook-id", "webhook-timestamp", "webhook-signature"))
    if not (msg_id and ts.isdigit() and sigs):
        return f"headers missing or malformed: {headers}"
    if abs(now - int(ts)) > 300:
        return f"webhook-timestamp {ts} is {now - int(ts):+.0f}s off"
    key = base64.b64decode(secret.removeprefix("whsec_"))
    want = base64.b64encode(hmac.new(key, f"{msg_id}.{ts}.".encode() + body, hashlib.sha256).digest())
    if not any(s == "v1," + want.decode() for s in sigs.split()):
        return f"no v1 signature matches: {sigs}"
    return ""


@dataclass
class Delivery:
    arrived: float  # time.time() when the request reached the receiver, before any `delay`
    headers: dict[str, str]  # lower-cased names
    body: bytes
    problem: str  # "" when the signature holds

    @property
    def webhook_id(self) -> str:
        return self.headers.get("webhook-id", "")

    @property
    def payload(self) -> dict[str, Any]:
        return dict(json.loads(self.body or b"{}"))

    def firing(self, alertname: str) -> list[tuple[str, str]]:
        """Return (namespace, workload) of each firing alert named `alertname` it carries."""
        return [
            (a["labels"].get("namespace", ""), a["labels"].get("workload", ""))
            for a in self.payload.get("alerts", [])
            if a.get("status") == "firing" and a["labels"].get("alertname") == alertname
        ]

    def content(self) -> tuple[str, tuple[tuple[str, str], ...]]:
        """Return what the notification says: its group and each alert's identity and status."""
        doc = self.payload
        alerts = tuple(sorted((json.dumps(a["labels"], sort_keys=True), a["status"]) for a in doc["alerts"]))
        return doc.get("groupKey", ""), alerts


@dataclass
class HookReceiver:
    """A webhook receiver that verifies signatures, takes `delay` seconds per request, and keeps all."""

    secret: str
    delay: float = 0.0
    deliveries: list[Delivery] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                arrived = time.time()
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                headers = {k.lower(): v for k, v in self.headers.items()}
                problem = signature_problem(receiver.secret, headers, body, now=time.time())
                if receiver.delay:
                    time.sleep(receiver.delay)
                with receiver._lock:
                    receiver.deliveries.append(Delivery(arrived, headers, body, problem))
                self.send_response(401 if problem else 204)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, name="hook-receiver", daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/hook"

    def start(self) -> HookReceiver:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def received(self) -> list[Delivery]:
        """Return every delivery in the order they arrived (with a `delay`, not the order they were kept)."""
        with self._lock:
            return sorted(self.deliveries, key=lambda d: d.arrived)

    def alerts(self, alertname: str, namespace: str, status: str) -> list[dict[str, Any]]:
        """Return the (verified) deliveries' alerts with this alertname, namespace and status."""
        return [
            a
            for d in self.received()
            if not d.problem
            for a in d.payload.get("alerts", [])
            if a["labels"].get("alertname") == alertname
            and a["labels"].get("namespace") == namespace
            and a.get("status") == status
        ]
