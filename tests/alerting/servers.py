"""Real servers for the alerting tests: an aiosmtpd SMTP server (STARTTLS + AUTH) and a webhook receiver,
both on 127.0.0.1 and free ports, stopped by the tests that start them."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime as dt
import hashlib
import hmac
import json
import socket
import ssl
import threading
from collections.abc import AsyncIterator
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import uvicorn
from aiosmtpd.controller import Controller
from aiosmtpd.smtp import AuthResult, LoginPassword
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

USER, PASSWORD = "watchtower", "s3cret-pass"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def self_signed(dirpath: Path) -> tuple[Path, Path]:
    """Return (cert, key) files of a fresh self-signed certificate for 127.0.0.1 / localhost."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = dt.datetime.now(dt.UTC)
    import ipaddress

    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    c, k = dirpath / "cert.pem", dirpath / "key.pem"
    c.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    k.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return c, k


class Inbox:
    def __init__(self) -> None:
        self.messages: list[tuple[str, list[str], bytes]] = []  # (mail from, rcpt tos, data)
        self.tls: list[bool] = []  # per message: did it arrive over TLS
        self.lock = threading.Lock()

    async def handle_DATA(self, server, session, envelope):  # aiosmtpd handler hook
        with self.lock:
            self.messages.append((envelope.mail_from, list(envelope.rcpt_tos), envelope.original_content))
            # session.ssl is only filled by STARTTLS; implicit TLS shows on the transport.
            self.tls.append(
                session.ssl is not None or server.transport.get_extra_info("ssl_object") is not None
            )
        return "250 OK"

    def parsed(self):
        with self.lock:
            return [message_from_bytes(m[2], policy=policy.default) for m in self.messages]


def _auth(server, session, envelope, mechanism, auth_data):
    ok = (
        isinstance(auth_data, LoginPassword)
        and auth_data.login == USER.encode()
        and (auth_data.password == PASSWORD.encode())
    )
    return AuthResult(success=ok)


def smtp_server(cert: Path, key: Path, port: int | None = None) -> tuple[Controller, Inbox]:
    """Start an SMTP server that requires STARTTLS before AUTH; return it (call .stop()) and its inbox."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert), str(key))
    inbox = Inbox()
    ctl = Controller(
        inbox,
        hostname="127.0.0.1",
        port=port or free_port(),
        tls_context=ctx,
        require_starttls=True,
        authenticator=_auth,
        auth_required=True,
        auth_require_tls=True,
    )
    ctl.start()
    return ctl, inbox


def plain_smtp_server(*, offer_starttls_with: tuple[Path, Path] | None = None) -> tuple[Controller, Inbox]:
    """Start an SMTP server without TLS and without AUTH (it may offer STARTTLS, never requiring it)."""
    ctx = None
    if offer_starttls_with is not None:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(*(str(p) for p in offer_starttls_with))
    inbox = Inbox()
    ctl = Controller(inbox, hostname="127.0.0.1", port=free_port(), tls_context=ctx)
    ctl.start()
    return ctl, inbox


def implicit_tls_smtp_server(cert: Path, key: Path) -> tuple[Controller, Inbox]:
    """Start an SMTP server that speaks TLS from the first byte (as on port 465), with AUTH required."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(str(cert), str(key))
    inbox = Inbox()
    ctl = Controller(
        inbox,
        hostname="127.0.0.1",
        port=free_port(),
        ssl_context=ctx,
        authenticator=_auth,
        auth_required=True,
        # aiosmtpd only counts STARTTLS as TLS for AUTH; here every byte is already encrypted.
        auth_require_tls=False,
    )
    ctl.start()
    return ctl, inbox


def client_tls(cert: Path) -> ssl.SSLContext:
    return ssl.create_default_context(cafile=str(cert))


class Receiver:
    """A webhook receiver that verifies Standard Webhooks signatures and answers from a script."""

    def __init__(self, secret: str) -> None:
        self.key = base64.b64decode(secret.removeprefix("whsec_"))
        self.requests: list[dict] = []
        self.script: list[tuple[int, dict[str, str]]] = []  # answers to give, in order; then 200
        self.hold: threading.Event | None = None  # when set: record the request, then wait before answering
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                mid, ts = self.headers.get("webhook-id", ""), self.headers.get("webhook-timestamp", "")
                mac = hmac.new(outer.key, f"{mid}.{ts}.".encode() + body, hashlib.sha256).digest()
                expected = "v1," + base64.b64encode(mac).decode()
                sigs = (self.headers.get("webhook-signature") or "").split()
                with outer.lock:
                    outer.requests.append(
                        {
                            "id": mid,
                            "verified": expected in sigs,
                            "body": json.loads(body),
                            "raw": body,
                            "at": dt.datetime.now(dt.UTC).timestamp(),
                        }
                    )
                    status, headers = outer.script.pop(0) if outer.script else (200, {})
                    hold = outer.hold
                if hold is not None:
                    hold.wait(30)
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@contextlib.asynccontextmanager
async def serve(app) -> AsyncIterator[str]:
    """Serve an ASGI app with uvicorn on 127.0.0.1 and a free port; yield its base URL; stop it after."""
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if task.done():
                task.result()  # raises what stopped it
            await asyncio.sleep(0.02)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task
