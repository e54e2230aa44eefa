"""What `watchtower report fairness` calls: the report rendered as html, text or csv, and `--send` through
a real store file to a real SMTP server, once per week per recipient however often it is run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.alerting.servers import plain_smtp_server
from tests.reports.sample import StandIn, report
from watchtower.bootstrap import StartupError
from watchtower.commands.report import render_report, send_reports
from watchtower.config import settings_from_mapping
from watchtower.domain.fairness.week import IsoWeek


def test_the_report_renders_as_html_text_and_csv_and_refuses_another_format() -> None:
    r = report()
    assert render_report(r, "html").startswith("<!DOCTYPE html>")
    assert "TEAM vision" in render_report(r, "text")
    csv = render_report(r, "csv", team="vision")
    assert csv.count("\r\n") == 2 and "\r\n2026-W47,vision," in csv
    with pytest.raises(ValueError, match="unknown report format 'pdf'"):
        render_report(r, "pdf")


async def test_send_delivers_each_recipient_once_and_a_second_run_adds_nothing(tmp_path: Path) -> None:
    ctl, inbox = plain_smtp_server()
    try:
        settings = settings_from_mapping(
            {
                "store": {"path": str(tmp_path / "state.db")},
                "alerting": {
                    "receivers": [
                        {"name": "hooks", "webhooks": [{"url": "http://127.0.0.1:9/"}]},
                        {
                            "name": "mail",
                            "email": [
                                {
                                    "to": ["oncall@x.example"],
                                    "smarthost": "127.0.0.1",
                                    "port": ctl.port,
                                    "security": "none",
                                }
                            ],
                        },
                    ],
                    "route": {"receiver": "mail"},
                },
                "fairness": {
                    "send": True,
                    "smtp_receiver": "mail",
                    "platform_recipients": ["lead@x.example"],
                    "team_recipients": {"nlp": ["nlp@x.example"]},
                },
            },
            env={},
        )
        week = IsoWeek.parse("2026-W47")
        outcome, statuses = await send_reports(settings, StandIn(), week, deliver_for=60)
        assert (outcome.enqueued, statuses) == (2, {"delivered": 2})
        assert sorted(r for _, rcpts, _ in inbox.messages for r in rcpts) == [
            "lead@x.example",
            "nlp@x.example",
        ]
        outcome, statuses = await send_reports(settings, StandIn(), week, deliver_for=60)
        assert (outcome.enqueued, outcome.already_sent, statuses) == (0, 2, {"delivered": 2})
        assert len(inbox.messages) == 2
    finally:
        ctl.stop()


async def test_send_without_an_email_receiver_says_so(tmp_path: Path) -> None:
    settings = settings_from_mapping({"store": {"path": str(tmp_path / "state.db")}}, env={})
    with pytest.raises(StartupError, match="no email receiver"):
        await send_reports(settings, StandIn(), IsoWeek.parse("2026-W47"))
