"""The fleet report's send without servers: its configuration's checks, one email per address a week
(case-insensitive), the report built only while some address lacks it, escaped HTML."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.config import settings_from_mapping
from watchtower.config.loading import ConfigError
from watchtower.domain.fairness.fleet import FleetReport, combine
from watchtower.domain.fairness.mail import ReportMail
from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fleet_send import FleetMailer

WEEK = IsoWeek(2023, 46)
NOW = 1700470800.0  # Monday 2023-11-20 09:00 UTC: the last complete week is 2023-W46
EMAIL_RECEIVER = {
    "receivers": [{"name": "ops", "email": [{"to": ["ops@x.example"], "smarthost": "smtp.x.example"}]}],
    "route": {"receiver": "ops"},
}


def settings(fleet: dict[str, Any], *, send: bool = True) -> Any:
    return settings_from_mapping(
        {"fairness": {"enabled": True, "send": send}, "alerting": EMAIL_RECEIVER, "fleet": fleet}, env={}
    )


def test_the_configuration_names_what_the_send_lacks() -> None:
    one = [{"name": "a", "url": "https://a.example"}]
    ok = settings(
        {
            "clusters": one,
            "report": {"send": True, "prometheus": "https://e.example", "recipients": ["l@x.example"]},
        }
    )
    assert ok.fleet.report.recipients == ["l@x.example"]
    for fleet, words in (
        (
            {"clusters": one, "report": {"send": True, "recipients": ["l@x.example"]}},
            "fleet.report.prometheus",
        ),
        (
            {"clusters": one, "report": {"send": True, "prometheus": "https://e.example"}},
            "fleet.report.recipients",
        ),
        (
            {"report": {"send": True, "prometheus": "https://e.example", "recipients": ["l@x.example"]}},
            "fleet.clusters",
        ),
        ({"report": {"prometheus": "e.example"}}, "not an http(s) URL"),
        ({"report": {"recipients": ["not an address"]}}, "not an email address"),
    ):
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            settings(fleet)
    with pytest.raises(ConfigError, match="set fairness.send too"):
        settings(
            {
                "clusters": one,
                "report": {"send": True, "prometheus": "https://e.example", "recipients": ["l@x.example"]},
            },
            send=False,
        )


class Clock:
    def now(self) -> float:
        return NOW


def test_one_email_per_address_a_week_and_the_report_built_only_while_one_is_due(tmp_path: Path) -> None:
    calls: list[str] = []

    async def source(week: IsoWeek) -> FleetReport:
        calls.append(str(week))
        return combine(
            str(week), NOW - 8 * 86400, NOW - 86400, NOW, {}, {"<b>x</b>": "its Watchtower did not answer"}
        )

    store = SQLiteAlertStore(tmp_path / "state.db")
    try:
        mailer = FleetMailer(
            source=source,
            outbox=store,
            clock=Clock(),
            timezone="UTC",
            recipients=["L@x.example", "l@x.example", "o@x.example"],
        )
        first = asyncio.run(mailer.send_week())
        again = asyncio.run(mailer.send_week())
        assert (first.week, first.enqueued, again.enqueued, again.already_sent) == (str(WEEK), 2, 0, 2)
        assert calls == [str(WEEK)]  # the second run found every address sent and asked no cluster
        msgs = store.messages()
        assert sorted(m.key for m in msgs) == [f"fleet:{WEEK}:l@x.example", f"fleet:{WEEK}:o@x.example"]
        mail = ReportMail.from_payload(msgs[0].payload)
        assert "&lt;b&gt;x&lt;/b&gt;" in mail.html and "<b>x</b>" not in mail.html
        assert "<b>x</b>: missing: its Watchtower did not answer" in mail.text
    finally:
        store.close()
