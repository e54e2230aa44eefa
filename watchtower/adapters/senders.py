"""The senders of every integration the alerting configuration names: SMTP and webhook, one each."""

from __future__ import annotations

import ssl

import httpx

from watchtower.config.alerting import AlertingConfig
from watchtower.domain.alerts.integration import IntegrationId
from watchtower.ports import Sender

from .email import EmailSender
from .webhook import WebhookSender


def build_senders(
    cfg: AlertingConfig,
    *,
    http: httpx.AsyncClient,
    tls_context: ssl.SSLContext | None = None,
) -> dict[str, Sender]:
    """Return integration id → its sender, from the configuration."""
    out: dict[str, Sender] = {}
    for r in cfg.receivers:
        for i, e in enumerate(r.email):
            ctx = tls_context
            if ctx is None and e.security != "none":
                ctx = ssl.create_default_context(cafile=e.ca_file)
                if not e.verify:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
            out[str(IntegrationId(r.name, "email", i))] = EmailSender(
                host=e.smarthost,
                port=e.port,
                sender=e.from_,
                to=list(e.to),
                security=e.security,
                username=e.username,
                password=e.password.get_secret_value() if e.password else None,
                timeout=e.timeout,
                deadline=e.deadline,
                tls_context=ctx,
            )
        for i, w in enumerate(r.webhooks):
            out[str(IntegrationId(r.name, "webhook", i))] = WebhookSender(
                url=w.url,
                client=http,
                secret=w.secret.get_secret_value() if w.secret else None,
                slack_compatible=w.slack_compatible,
                timeout=w.timeout,
            )
    return out
