"""The senders of every integration the alerting configuration names: SMTP and webhook, one each, and one
per Alertmanager that alerts are pushed to."""

from __future__ import annotations

import ssl

import httpx

from watchtower.config.alerting import AlertingConfig, EmailConfig, WebhookConfig
from watchtower.ports import Sender

from .alertmanager_push import AlertmanagerSender
from .email import EmailSender
from .webhook import WebhookSender


def build_senders(
    cfg: AlertingConfig,
    *,
    http: httpx.AsyncClient,
    tls_context: ssl.SSLContext | None = None,
    cluster_label: str | None = None,
) -> dict[str, Sender]:
    """Return integration id → its sender, from the configuration; emails name the cluster the alerts'
    `cluster_label` gives."""
    out: dict[str, Sender] = {}
    for r in cfg.receivers:
        for integration, c in r.channels():
            out[str(integration)] = _sender(
                c, http=http, tls_context=tls_context, cluster_label=cluster_label
            )
    p = cfg.push
    for target, url in cfg.push_targets().items():
        # A message older than two resends has been restated by a later one.
        out[target] = AlertmanagerSender(
            url=url, client=http, stale_after=2 * p.resend_interval, timeout=p.timeout
        )
    return out


def build_report_sender(
    cfg: AlertingConfig,
    *,
    receiver: str = "",
    http: httpx.AsyncClient,
    tls_context: ssl.SSLContext | None = None,
) -> Sender | None:
    """Return the sender of the weekly reports: the SMTP settings of the receiver named (`fairness.smtp_receiver`),
    else of the first receiver with an email integration; None when there is none. It sends each report to
    the recipients the report names, not to the receiver's `to`."""
    for r in cfg.receivers:
        if r.email and (not receiver or r.name == receiver):
            return _sender(r.email[0], http=http, tls_context=tls_context)
    return None


def _sender(
    c: EmailConfig | WebhookConfig,
    *,
    http: httpx.AsyncClient,
    tls_context: ssl.SSLContext | None,
    cluster_label: str | None = None,
) -> Sender:
    if isinstance(c, WebhookConfig):
        return WebhookSender(
            url=c.url,
            client=http,
            secret=c.secret.get_secret_value() if c.secret else None,
            slack_compatible=c.slack_compatible,
            timeout=c.timeout,
            cluster_label=cluster_label,
        )
    ctx = tls_context
    if ctx is None and c.security != "none":
        ctx = ssl.create_default_context(cafile=c.ca_file)
        if not c.verify:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
    return EmailSender(
        host=c.smarthost,
        port=c.port,
        sender=c.from_,
        to=list(c.to),
        security=c.security,
        username=c.username,
        password=c.password.get_secret_value() if c.password else None,
        timeout=c.timeout,
        deadline=c.deadline,
        tls_context=ctx,
        cluster_label=cluster_label,
    )
