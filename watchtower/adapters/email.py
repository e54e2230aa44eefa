"""Email delivery with aiosmtplib: plain, STARTTLS or implicit TLS, optional AUTH, multipart text + HTML.

Headers are built by `email.message.EmailMessage` under the SMTP policy, which refuses CR/LF in a header
value: whatever a label holds, it cannot add a header or a recipient.
"""

from __future__ import annotations

import asyncio
import base64
import email
import email.header
import hashlib
import html
import ssl
import time
from collections.abc import Mapping
from email import policy
from email.message import EmailMessage
from email.utils import formatdate, parseaddr
from pathlib import Path
from typing import Any

import aiosmtplib
import jinja2

from watchtower.domain.alerts.outbox import DeliveryResult, OutboxMessage, Outcome
from watchtower.domain.alerts.payload import cluster_of, title
from watchtower.domain.fairness.mail import ReportMail, is_report
from watchtower.domain.fairness.recipients import message_id, one_line, valid_address
from watchtower.domain.owners.payload import is_owner_notice, notice_text

TEMPLATES = Path(__file__).parent / "templates"


def template_env() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        # Escape in the HTML part; the text part is plain text and must stay as written.
        autoescape=jinja2.select_autoescape(enabled_extensions=("html.j2",), default=False),
        undefined=jinja2.ChainableUndefined,
        keep_trailing_newline=True,
    )


def _domain(addr: str) -> str:
    return parseaddr(addr)[1].rpartition("@")[2] or "watchtower.local"


def build_message(
    msg: OutboxMessage,
    *,
    sender: str,
    to: list[str],
    env: jinja2.Environment,
    at: float,
    cluster_label: str | None = None,
) -> EmailMessage:
    """Return the email for one notification; raise ValueError if a header would be unsafe.

    The subject and the body name the cluster when every alert carries `cluster_label`."""
    p: Mapping[str, Any] = msg.payload
    alerts = list(p.get("alerts", []))
    ctx = {
        "title": title(p, cluster_label=cluster_label),
        "cluster": cluster_of(p, cluster_label),
        "firing": [a for a in alerts if a.get("status") == "firing"],
        "resolved": [a for a in alerts if a.get("status") != "firing"],
        "receiver": p.get("receiver", ""),
        "external_url": p.get("externalURL", ""),
        "key": msg.key,
    }
    domain = _domain(sender)
    thread = hashlib.sha256(f"{msg.integration}\x00{msg.group_key}".encode()).hexdigest()[:24]
    em = EmailMessage(policy=policy.SMTP)
    em["Subject"] = ctx["title"]
    em["From"] = sender
    em["To"] = ", ".join(to)
    em["Date"] = formatdate(at, usegmt=True)
    # Stable across retries: a duplicate after a crash carries the same Message-ID, and mail clients fold it.
    em["Message-ID"] = f"<{msg.key}@{domain}>"
    # Every notification of one group answers the same root, so clients show one thread per group.
    em["References"] = f"<group-{thread}@{domain}>"
    em["In-Reply-To"] = f"<group-{thread}@{domain}>"
    em["X-Watchtower-Idempotency-Key"] = msg.key
    em.set_content(env.get_template("email.txt.j2").render(ctx))
    em.add_alternative(env.get_template("email.html.j2").render(ctx), subtype="html")
    return em


def build_report_message(msg: OutboxMessage, *, sender: str, at: float) -> EmailMessage:
    """Return the email of a weekly fairness report (payload `ReportMail`); raise ValueError if it is damaged
    or a header would be unsafe.

    multipart/mixed: [multipart/alternative: [text/plain, multipart/related: [text/html, image/png...]],
    text/csv attachment]. The HTML references each image by `cid:`.
    """
    mail = ReportMail.from_payload(msg.payload)
    bad = [a for a in mail.to if not valid_address(a)]
    if bad or not mail.to:
        raise ValueError(f"not an address to send a report to: {bad or 'none'}")
    domain = _domain(sender)
    em = EmailMessage(policy=policy.SMTP)
    # one_line: no CR/LF can reach a header; the policy then encodes non-ASCII words (RFC 2047).
    em["Subject"] = one_line(mail.subject)
    em["From"] = sender
    em["To"] = ", ".join(mail.to)
    em["Date"] = formatdate(at, usegmt=True)
    # Stable across retries and a crash mid-send: the one possible duplicate carries the same Message-ID.
    em["Message-ID"] = message_id(mail.message_id_key or msg.key, domain)
    em["X-Watchtower-Idempotency-Key"] = one_line(msg.key)
    em["Auto-Submitted"] = "auto-generated"
    em.set_content(mail.text)
    em.add_alternative(mail.html, subtype="html")
    html = em.get_body(preferencelist=("html",))
    if not isinstance(html, EmailMessage):
        raise ValueError("the report's HTML part is missing")
    for img in mail.images:
        html.add_related(img.png, maintype="image", subtype="png", cid=f"<{img.cid}>", disposition="inline")
    for a in mail.attachments:
        maintype, _, subtype = a.content_type.partition("/")
        em.add_attachment(a.data, maintype=maintype, subtype=subtype or "octet-stream", filename=a.filename)
    return em


def owner_message(msg: OutboxMessage, *, sender: str, to: list[str], at: float) -> tuple[list[str], bytes]:
    """Return the recipients and the wire bytes of an owner notice's email: to its own addresses (an
    annotation's or a contact's) or, sent through a receiver, to the receiver's; raise ValueError if an
    address or a header would be unsafe.

    Written out directly, not through `EmailMessage`: a storm sends thousands, and the email package's
    header objects cost ~5 ms a message, most of the event loop's time in a storm. Every header value is
    one line (checked here, as the SMTP policy checks), non-ASCII words RFC 2047 encoded; both parts base64,
    so no body line can end the message or reach a header. Every text of the notice comes from the cluster
    (workload names, the scheduler's words): the subject is one line, the HTML part escapes each line."""
    p = msg.payload
    own = [str(a) for a in p.get("to") or []]
    recipients = own or to
    bad = [a for a in recipients if not valid_address(a)]
    if bad or not recipients:
        raise ValueError(f"not an address to send an owner notice to: {bad or 'none'}")
    domain = _domain(sender)
    subject = one_line(str(p.get("subject", "")))[:200]
    lines = [str(x) for x in p.get("lines", [])]
    url = str(p.get("workloadURL") or p.get("externalURL") or "")
    words = "Its page on Watchtower" if p.get("workloadURL") else "Watchtower"
    link = (
        f'<p><a href="{html.escape(url, quote=True)}">{words}</a></p>'
        if url.startswith(("http://", "https://"))
        else ""
    )
    body = "".join(f"<p>{html.escape(x)}</p>" for x in lines)
    page = f"<!doctype html><html><body><h3>{html.escape(subject)}</h3>{body}{link}</body></html>\n"
    # "=_" never occurs in base64: the boundary cannot appear in a part.
    boundary = f"=_wt_{hashlib.sha256(msg.key.encode()).hexdigest()[:32]}"
    head = [
        ("Subject", subject),
        ("From", sender),
        ("To", ", ".join(recipients)),
        ("Date", formatdate(at, usegmt=True)),
        ("Message-ID", message_id(msg.key, domain)),
        ("X-Watchtower-Idempotency-Key", one_line(msg.key)),
        ("Auto-Submitted", "auto-generated"),
        ("MIME-Version", "1.0"),
        ("Content-Type", f'multipart/alternative; boundary="{boundary}"'),
    ]
    out = [_header_line(name, value) for name, value in head]
    for subtype, text in (("plain", notice_text(p)), ("html", page)):
        out += [
            "",
            f"--{boundary}",
            f'Content-Type: text/{subtype}; charset="utf-8"',
            "Content-Transfer-Encoding: base64",
            "",
            base64.encodebytes(text.encode()).decode("ascii").replace("\n", "\r\n").rstrip("\r\n"),
        ]
    out += ["", f"--{boundary}--", ""]
    return recipients, "\r\n".join(out).encode("ascii")


def _header_line(name: str, value: str) -> str:
    """Return one header's line; raise ValueError for a value that would break out of it."""
    if any(c in value for c in "\r\n\0"):
        raise ValueError(f"a line break in the {name} header")
    if not value.isascii():
        encoded = email.header.Header(value, "utf-8", header_name=name).encode(linesep="\r\n")
        return f"{name}: {encoded}"
    return f"{name}: {value}"


def build_owner_message(msg: OutboxMessage, *, sender: str, to: list[str], at: float) -> EmailMessage:
    """Return the email of an owner notice as a mail client reads it: `owner_message`'s bytes, parsed."""
    _, raw = owner_message(msg, sender=sender, to=to, at=at)
    em = email.message_from_bytes(raw, policy=policy.SMTP)
    assert isinstance(em, EmailMessage)
    return em


class EmailSender:
    """Sends outbox messages to one email integration."""

    def __init__(
        self,
        *,
        host: str,
        port: int,
        sender: str,
        to: list[str],
        security: str = "starttls",  # none | starttls | tls
        username: str | None = None,
        password: str | None = None,
        timeout: float = 10.0,
        deadline: float = 60.0,
        tls_context: ssl.SSLContext | None = None,
        env: jinja2.Environment | None = None,
        cluster_label: str | None = None,
    ) -> None:
        self.host, self.port, self.sender, self.to = host, port, sender, list(to)
        self.security = security
        self.username, self.password = username, password
        self.timeout, self.deadline = timeout, deadline
        self.tls_context = tls_context
        self.env = env or template_env()
        self.cluster_label = cluster_label
        self._idle: list[tuple[aiosmtplib.SMTP, float]] = []  # owner-notice sessions left open

    async def send(self, msg: OutboxMessage, *, now: float) -> DeliveryResult:
        if is_owner_notice(msg.payload):
            return await self._send_owner_notice(msg, now=now)
        try:
            if is_report(msg.payload):
                em = build_report_message(msg, sender=self.sender, at=now)
            else:
                em = build_message(
                    msg,
                    sender=self.sender,
                    to=self.to,
                    env=self.env,
                    at=now,
                    cluster_label=self.cluster_label,
                )
        except (ValueError, jinja2.TemplateError) as e:
            return DeliveryResult(Outcome.REJECTED, f"cannot build the email: {e}")
        client = self._client()
        try:
            async with asyncio.timeout(self.deadline):
                await client.connect()
                try:
                    if self.username:
                        await client.login(self.username, self.password or "")
                    errors, _ = await client.send_message(em)
                finally:
                    try:
                        await client.quit()
                    except aiosmtplib.SMTPException:
                        client.close()
        except Exception as e:
            client.close()
            return _failure(e)
        return _sent(errors)

    async def _send_owner_notice(self, msg: OutboxMessage, *, now: float) -> DeliveryResult:
        """Send an owner notice on a session kept open between messages: a storm's thousands would
        otherwise each open a connection and greet the server (three round trips more each)."""
        try:
            recipients, raw = owner_message(msg, sender=self.sender, to=self.to, at=now)
        except ValueError as e:
            return DeliveryResult(Outcome.REJECTED, f"cannot build the email: {e}")
        client = self._take_idle()
        try:
            async with asyncio.timeout(self.deadline):
                if client is not None:
                    try:
                        errors, _ = await client.sendmail(self.sender, recipients, raw)
                    except aiosmtplib.SMTPServerDisconnected:
                        # The server ended the idle session: a new one. (Had it taken the message first,
                        # the one duplicate carries the same Message-ID.)
                        client.close()
                        client = None
                if client is None:
                    client = self._client()
                    await client.connect()
                    if self.username:
                        await client.login(self.username, self.password or "")
                    errors, _ = await client.sendmail(self.sender, recipients, raw)
        except Exception as e:
            if client is not None:
                client.close()
            return _failure(e)
        self._idle.append((client, time.monotonic()))
        return _sent(errors)

    def _take_idle(self) -> aiosmtplib.SMTP | None:
        """Return a session left open by an owner notice sent lately, if one is still connected."""
        while self._idle:
            client, since = self._idle.pop()
            if client.is_connected and time.monotonic() - since < IDLE_SESSION:
                return client
            client.close()
        return None

    def _client(self) -> aiosmtplib.SMTP:
        return aiosmtplib.SMTP(
            hostname=self.host,
            port=self.port,
            timeout=self.timeout,
            use_tls=self.security == "tls",
            start_tls=self.security == "starttls",  # "none" never upgrades, even if offered
            tls_context=self.tls_context,
        )


# How long an owner-notice session may sit idle and still be used: well under the 5 minutes servers wait
# for a command (RFC 5321 4.5.3.2.7), so a session kept open is not found closed mid-command.
IDLE_SESSION = 10.0


def _failure(e: Exception) -> DeliveryResult:
    """Return the outcome of a send that raised: refused for good (5xx), or to retry later."""
    if isinstance(e, aiosmtplib.SMTPRecipientsRefused):
        codes = [r.code for r in e.recipients]
        temporary = any(400 <= c < 500 for c in codes)
        return DeliveryResult(
            Outcome.RETRY if temporary else Outcome.REJECTED, f"recipients refused: {codes}"
        )
    if isinstance(e, aiosmtplib.SMTPResponseException):
        outcome = Outcome.RETRY if 400 <= e.code < 500 else Outcome.REJECTED
        return DeliveryResult(outcome, f"SMTP {e.code}: {e.message}")
    if isinstance(e, (aiosmtplib.SMTPException, OSError, TimeoutError, ssl.SSLError)):
        return DeliveryResult(Outcome.RETRY, f"{type(e).__name__}: {e}")
    raise e


def _sent(errors: Mapping[str, Any]) -> DeliveryResult:
    if errors:
        # Some recipients refused: the others have it; resending would duplicate theirs.
        return DeliveryResult(Outcome.SENT, f"refused by {sorted(errors)}")
    return DeliveryResult(Outcome.SENT)
