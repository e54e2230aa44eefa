"""Enqueueing a week's report emails: who gets which, once per week per recipient, across runs and restarts,
with a real SQLite store file; a bad annotated address is a counted, logged skip."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from tests.reports.sample import HOSTILE_NS, StandIn
from watchtower.adapters.report.presenter import FairnessPresenter
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.config.fairness import FairnessConfig
from watchtower.domain.fairness.mail import ReportMail
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.records import Namespace
from watchtower.ports import PromReadError
from watchtower.services.fairness_send import REPORT_INTEGRATION, FairnessMailer, FairnessSendMetrics

NOW = IsoWeek.parse("2026-W48").bounds(__import__("datetime").UTC)[0] + 9 * 3600  # Monday 09:00 of W48

CFG = FairnessConfig(
    send=True,
    platform_recipients=["lead@x.example"],
    team_recipients={"nlp": ["nlp@x.example", "lead@x.example"]},
)
NAMESPACES = {
    "team-vision": Namespace(
        "team-vision", "vision", "vision@x.example, not an address, x@y\r\nBcc: e@v.example"
    ),
    HOSTILE_NS: Namespace(HOSTILE_NS, "", "hostile@x.example"),
}


class Clock:
    def now(self) -> float:
        return NOW


def mailer(
    store: SQLiteAlertStore, source: StandIn, registry: CollectorRegistry | None = None
) -> FairnessMailer:
    return FairnessMailer(
        source=source,
        presenter=FairnessPresenter(),
        outbox=store,
        clock=Clock(),
        cfg=CFG,
        namespaces=lambda: NAMESPACES,
        page_url=lambda w: f"https://watchtower.example/reports/fairness/{w}",
        metrics=FairnessSendMetrics(registry=registry or CollectorRegistry()),
    )


async def test_each_recipient_gets_one_email_of_what_it_is_owed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = SQLiteAlertStore(tmp_path / "state.db")
    reg = CollectorRegistry()
    with caplog.at_level(logging.WARNING):
        out = await mailer(store, StandIn(), reg).send_week()
    assert out.week == "2026-W47"  # the last complete week at Monday 09:00 of W48
    assert out.enqueued == 4 and out.already_sent == 0
    assert out.recipients == ("hostile@x.example", "lead@x.example", "nlp@x.example", "vision@x.example")
    # The two entries of the annotation that are no addresses: skipped, counted, logged as one inert line each.
    assert out.skipped == ("team-vision: not an address", "team-vision: x@y\r\nBcc: e@v.example")
    assert (
        reg.get_sample_value(
            "watchtower_fairness_report_recipients_skipped_total", {"reason": "invalid_address"}
        )
        == 2
    )
    assert reg.get_sample_value("watchtower_fairness_reports_enqueued_total") == 4
    assert "'team-vision: x@y\\r\\nBcc: e@v.example'" in caplog.text
    mails = {m.key: ReportMail.from_payload(m.payload) for m in store.messages()}
    assert set(mails) == {f"fairness:2026-W47:{a}" for a in out.recipients}
    assert all(m.integration == REPORT_INTEGRATION for m in store.messages())
    lead = mails["fairness:2026-W47:lead@x.example"]
    assert lead.to == ("lead@x.example",) and lead.subject == "Watchtower fairness report 2026-W47: cluster"
    assert "nlp-serving" in lead.html and "team-vision" in lead.html  # the whole report
    vis = mails["fairness:2026-W47:vision@x.example"]
    assert vis.subject == "Watchtower fairness report 2026-W47: team vision"
    assert "team-vision" in vis.html and "nlp-serving" not in vis.html
    assert "https://watchtower.example/reports/fairness/2026-W47" in vis.text
    assert {i.cid.split(".")[0] for i in vis.images} == {"shares", "waits", "breakdown", "trend"}
    assert vis.attachments[0].filename == "fairness-2026-W47-vision.csv"
    hostile = mails["fairness:2026-W47:hostile@x.example"]
    assert "\n" not in hostile.subject and "\r" not in hostile.subject
    store.close()


async def test_the_job_firing_twice_or_after_a_restart_enqueues_nothing_new(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SQLiteAlertStore(db)
    source = StandIn()
    assert (await mailer(store, source).send_week()).enqueued == 4
    again = await mailer(store, source).send_week()
    assert (again.enqueued, again.already_sent) == (0, 4)
    store.close()
    store = SQLiteAlertStore(db)  # the process restarted
    assert (await mailer(store, StandIn()).send_week()).enqueued == 0
    assert len(store.messages()) == 4
    # Another week is another send.
    assert (await mailer(store, source).send_week(IsoWeek.parse("2026-W46"))).enqueued == 4
    store.close()


async def test_a_report_that_cannot_be_made_records_nothing_and_the_next_run_sends(tmp_path: Path) -> None:
    store = SQLiteAlertStore(tmp_path / "state.db")
    source = StandIn()
    source.fail = PromReadError("connection refused")
    with pytest.raises(PromReadError):
        await mailer(store, source).send_week()
    assert store.messages() == [] and store.recorded(["fairness:2026-W47:lead@x.example"]) == set()
    source.fail = None
    assert (await mailer(store, source).send_week()).enqueued == 4
    store.close()
