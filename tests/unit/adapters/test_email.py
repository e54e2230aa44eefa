"""The report email as a real SMTP server (aiosmtpd, with STARTTLS and AUTH) receives it, parsed as a mail
client would: text part, HTML with inline charts referenced by cid, the CSV attached; a hostile team name
adds no header and runs no markup."""

from __future__ import annotations

import csv
import io
import re
from email.message import EmailMessage
from pathlib import Path

import pytest

from tests.alerting.servers import PASSWORD, USER, client_tls, self_signed, smtp_server
from tests.reports.sample import HOSTILE_TEAM, report
from watchtower.adapters.email import EmailSender
from watchtower.adapters.report.presenter import FairnessPresenter
from watchtower.domain.alerts.outbox import OutboxMessage, Outcome
from watchtower.domain.fairness.recipients import message_id, send_key

NOW = 1_795_000_000.0


def outbox_message(teams: list[str] | None, to: str) -> OutboxMessage:
    key = send_key("2026-W47", to)
    mail = FairnessPresenter().mail(
        report(), to=[to], teams=teams, key=key, footer="The page: https://w.example/"
    )
    return OutboxMessage(1, key, "fairness-report/email/0", "fairness:2026-W47", mail.to_payload(), NOW)


@pytest.fixture
def smtp(tmp_path: Path):  # type: ignore[no-untyped-def]
    cert, key = self_signed(tmp_path)
    ctl, inbox = smtp_server(cert, key)
    sender = EmailSender(
        host="127.0.0.1",
        port=ctl.port,
        sender="Watchtower <watchtower@cluster.example>",
        to=["alerts-only@x.example"],  # the receiver's own list: a report goes to its recipients instead
        security="starttls",
        username=USER,
        password=PASSWORD,
        tls_context=client_tls(cert),
    )
    yield sender, inbox
    ctl.stop()


async def sent(smtp, msg: OutboxMessage) -> tuple[EmailMessage, list[str]]:  # type: ignore[no-untyped-def]
    sender, inbox = smtp
    res = await sender.send(msg, now=NOW)
    assert res.outcome is Outcome.SENT, res.detail
    (got,) = inbox.parsed()
    return got, inbox.messages[0][1]


async def test_the_email_has_text_html_with_inline_charts_and_the_csv(smtp) -> None:  # type: ignore[no-untyped-def]
    em, rcpts = await sent(smtp, outbox_message(None, "lead@x.example"))
    assert rcpts == ["lead@x.example"]
    assert em["Subject"] == "Watchtower fairness report 2026-W47: cluster"
    assert em["Message-ID"] == message_id("fairness:2026-W47:lead@x.example", "cluster.example")
    assert em["X-Watchtower-Idempotency-Key"] == "fairness:2026-W47:lead@x.example"
    assert em.get_content_type() == "multipart/mixed"
    alt, attachment = em.get_payload()
    assert alt.get_content_type() == "multipart/alternative"
    text, related = alt.get_payload()
    assert text.get_content_type() == "text/plain" and related.get_content_type() == "multipart/related"
    body = text.get_content()
    assert "COVERAGE" in body and "Jain's index (2 teams with demand): 0.912 this week" in body
    assert "The page: https://w.example/" in body
    html_part, *images = related.get_payload()
    html = html_part.get_content()
    refs = set(re.findall(r'src="cid:([^"]+)"', html))
    cids = {i["Content-ID"].strip("<>") for i in images}
    assert len(refs) == 4 and refs == cids  # every chart referenced is there, and nothing else
    for i in images:
        png = i.get_content()
        assert i.get_content_type() == "image/png" and png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert (
        attachment.get_content_type() == "text/csv"
        and attachment.get_filename() == "fairness-2026-W47-cluster.csv"
    )
    rows = list(csv.DictReader(io.StringIO(attachment.get_content(), newline="")))
    vision = next(r for r in rows if r["team"] == "vision")
    assert float(vision["used_gpu_hours"]) == 2016.0 and float(vision["wait_p95_s_low"]) == 14400.0
    assert len(rows) == 3


async def test_a_hostile_team_name_adds_no_header_and_is_escaped_in_the_html(smtp) -> None:  # type: ignore[no-untyped-def]
    em, rcpts = await sent(smtp, outbox_message([HOSTILE_TEAM], "hostile@x.example"))
    assert rcpts == ["hostile@x.example"]  # no Bcc smuggled in
    assert em["Bcc"] is None and em.get_all("To") == ["hostile@x.example"]
    subject = em["Subject"]
    assert "\n" not in subject and "\r" not in subject
    assert subject.startswith("Watchtower fairness report 2026-W47: team =cmd|<script>")
    assert "Bcc: victim@evil.example" in subject  # kept as words of the subject, not a header
    head = em.as_bytes().split(b"\n\n", 1)[0]
    assert not re.search(rb"(?m)^Bcc:", head)  # folded lines begin with a space: no header of their own
    assert [k for k in em if k.lower() in ("bcc", "cc")] == []
    html = em.get_body(preferencelist=("html",)).get_content()
    assert "<script>" not in html and "&lt;script&gt;" in html


async def test_a_non_ascii_subject_is_encoded_by_rfc_2047(smtp) -> None:  # type: ignore[no-untyped-def]
    import dataclasses

    from tests.reports.sample import vision

    rep = report(teams=(dataclasses.replace(vision(), team="équipe-vision"),))
    key = send_key("2026-W47", "v@x.example")
    mail = FairnessPresenter().mail(rep, to=["v@x.example"], teams=["équipe-vision"], key=key)
    sender, inbox = smtp
    assert (
        await sender.send(OutboxMessage(1, key, "f", "g", mail.to_payload(), NOW), now=NOW)
    ).outcome is Outcome.SENT
    raw = inbox.messages[0][2]
    assert b"=?utf-8?" in raw.split(b"\r\n\r\n")[0].lower()
    assert inbox.parsed()[0]["Subject"] == "Watchtower fairness report 2026-W47: team équipe-vision"


async def test_a_damaged_report_payload_is_refused_for_good_not_retried(smtp) -> None:  # type: ignore[no-untyped-def]
    sender, inbox = smtp
    msg = OutboxMessage(1, "k", "f", "g", {"kind": "fairness-report", "subject": "x"}, NOW)
    res = await sender.send(msg, now=NOW)
    assert res.outcome is Outcome.REJECTED and "damaged" in res.detail
    bad_to = outbox_message(None, "lead@x.example")
    payload = {**bad_to.payload, "to": ["a@x.example\r\nBcc: e@v.example"]}
    res = await sender.send(OutboxMessage(1, "k", "f", "g", payload, NOW), now=NOW)
    assert res.outcome is Outcome.REJECTED and inbox.messages == []
