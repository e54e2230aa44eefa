"""Email over each transport the configuration offers, against a real aiosmtpd server on 127.0.0.1:
plain SMTP (no TLS, no AUTH) and implicit TLS (TLS from the first byte, AUTH). STARTTLS + AUTH is covered
in test_notifications."""

from __future__ import annotations

import ssl

from tests.alerting.helpers import T0, Clock, pending
from tests.alerting.servers import client_tls, implicit_tls_smtp_server, plain_smtp_server, self_signed
from tests.alerting.test_notifications import Rig, email_settings
from watchtower.adapters.senders import build_senders
from watchtower.domain.alerts.outbox import OutboxMessage, Outcome


def mail_settings(port: int, security: str, *, auth: bool):
    s = email_settings(port, group_wait="0s")
    email = (
        s.alerting.receivers[0]
        .email[0]
        .model_copy(update={"security": security, **({} if auth else {"username": None, "password": None})})
    )
    receiver = s.alerting.receivers[0].model_copy(update={"email": [email]})
    return s.model_copy(update={"alerting": s.alerting.model_copy(update={"receivers": [receiver]})})


async def test_plain_smtp_delivers_without_tls_even_when_the_server_offers_starttls(tmp_path):
    cert, key = self_signed(tmp_path)
    ctl, inbox = plain_smtp_server(offer_starttls_with=(cert, key))
    try:
        rig = Rig(mail_settings(ctl.port, "none", auth=False), tmp_path, Clock())
        await rig.tick([pending("job", "critical", T0 - 6 * 60)], T0)
        (m,) = inbox.parsed()
        assert m["Subject"] == "[FIRING:1] WorkloadWaitWarning team-a"
        assert inbox.tls == [False]  # "none" means none: no opportunistic upgrade
        assert rig.store.depth() == {}
        await rig.close()
    finally:
        ctl.stop()


async def test_implicit_tls_with_auth_delivers_over_tls(tmp_path):
    cert, key = self_signed(tmp_path)
    ctl, inbox = implicit_tls_smtp_server(cert, key)
    try:
        rig = Rig(mail_settings(ctl.port, "tls", auth=True), tmp_path, Clock(), tls=client_tls(cert))
        await rig.tick([pending("job", "critical", T0 - 6 * 60)], T0)
        (m,) = inbox.parsed()
        assert m["Subject"] == "[FIRING:1] WorkloadWaitWarning team-a"
        assert inbox.tls == [True]
        assert inbox.messages[0][1] == ["oncall@example.org", "ml-team@example.org"]
        await rig.close()
    finally:
        ctl.stop()


async def test_implicit_tls_to_an_untrusted_certificate_is_retried_not_sent(tmp_path):
    cert, key = self_signed(tmp_path)
    ctl, inbox = implicit_tls_smtp_server(cert, key)
    try:
        s = mail_settings(ctl.port, "tls", auth=True)
        (sender,) = build_senders(s.alerting, http=None, tls_context=ssl.create_default_context()).values()
        msg = OutboxMessage(1, "msg_x", "mail/email/0", "{}:{}", {"alerts": [], "status": "firing"}, T0)
        res = await sender.send(msg, now=T0)
        assert res.outcome is Outcome.RETRY and "CERTIFICATE_VERIFY_FAILED" in res.detail
        assert inbox.messages == []
    finally:
        ctl.stop()
