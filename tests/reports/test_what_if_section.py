"""The weekly report's "What if" section through the real renderers (HTML, text, JSON, CSV) and the real
email: the hand-made report of tests/reports/sample.py with a section computed by the replay from a
two-job week of its teams nlp and vision, under a policy whose name tries markup and a formula."""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from email.message import EmailMessage
from pathlib import Path

from tests.alerting.servers import plain_smtp_server
from tests.reports.sample import StandIn, report
from watchtower.api.schemas.fairness import FairnessReport as FairnessReportSchema
from watchtower.commands.report import render_report, send_reports
from watchtower.config import settings_from_mapping
from watchtower.config.model import Settings
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.fairness.what_if import WhatIfFailure
from watchtower.replay.policy import NodeSpec
from watchtower.replay.trace import TraceJob
from watchtower.replay.what_if import NO_JOBS, what_if

HOSTILE_POLICY = '=1+1 <script>alert("p")</script> & co'


def with_section() -> FairnessReport:
    r = report()
    jobs = [
        TraceJob("a", "nlp", "low", 0, r.start, 100.0, 1, 2, started=r.start),
        TraceJob("b", "vision", "high", 900_000, r.start + 10, 50.0, 1, 2, started=r.start + 100),
    ]
    section = what_if(
        jobs,
        [NodeSpec(name="gpu-1", gpus=2)],
        Settings().tiers,
        [(HOSTILE_POLICY, {"preemption": {"high": "never"}}), ("today", {"quotas": {}})],
    )
    return dataclasses.replace(r, what_if=section)


def test_the_page_shows_each_tier_and_team_beside_the_observed_and_escapes_the_policys_name() -> None:
    page = render_report(with_section(), "html")
    part = page[page.index('<section id="what-if">') : page.index('<section id="method">')]
    assert "<h2>What if</h2>" in part
    assert "<script>" not in page and "=1+1 &lt;script&gt;alert(&#34;p&#34;)&lt;/script&gt; &amp; co" in part
    assert '<td>high</td><td>observed</td><td class="num">1</td><td class="num">1m</td>' in part
    assert '<td>as configured</td><td class="num">1</td><td class="num">30s</td>' in part
    assert "the configuration replayed (fidelity)" in part
    # nlp waits 50 s less than the configuration replayed, and attains 26.3 points more.
    assert '<td class="num">−50s</td><td class="num">100.0 %</td><td class="num">+26.3 pts</td>' in part


def test_the_text_json_and_csv_carry_the_section() -> None:
    r = with_section()
    text = render_report(r, "text")
    assert "WHAT IF (the week's recorded jobs replayed under " + HOSTILE_POLICY + ", today;" in text
    assert f"    {HOSTILE_POLICY}: p50 1m, p95 1m (1 jobs)" in text
    assert "  team vision:\n" in text
    whole = json.loads(render_report(r, "json"))
    FairnessReportSchema.model_validate(whole)  # the API's declared model, unknown keys refused
    doc = whole["what_if"]
    assert [x["name"] for x in doc["runs"]] == ["observed", "as configured", HOSTILE_POLICY, "today"]
    assert doc["failures"] == []
    nlp = next(t for t in doc["teams"] if t["team"] == "nlp")
    assert nlp["runs"][2] == {
        "run": HOSTILE_POLICY,
        "jobs": 1,
        "wait_mean_seconds": 0.0,
        "attainment": 1.0,
        "wait_change_seconds": -50.0,
        "attainment_change": 0.2632,
    }
    rows = list(csv.DictReader(io.StringIO(render_report(r, "csv", team="nlp"))))
    assert [row["team"] for row in rows] == ["nlp"]
    assert rows[0]["whatif_wait_mean_s_as configured"] == "50.0"
    # The policy's name starts with "=": its columns are quoted so a spreadsheet reads no formula.
    assert rows[0][f"whatif_wait_change_s_'{HOSTILE_POLICY}"] == "-50.0"
    assert rows[0]["whatif_wait_p50_s_high_observed"] == "90.0"


def test_a_failed_replay_and_an_empty_week_are_said_and_a_team_sees_only_its_lines() -> None:
    r = with_section()
    assert r.what_if is not None
    broken = dataclasses.replace(
        r, what_if=dataclasses.replace(r.what_if, failures=(WhatIfFailure("x", "why <b>"),))
    )
    assert '<p class="missing">x: could not be replayed: why &lt;b&gt;</p>' in render_report(broken, "html")
    assert "  x: could not be replayed: why <b>\n" in render_report(broken, "text")
    empty = dataclasses.replace(r, what_if=what_if([], [], Settings().tiers, [("p", {})]))
    assert f'<p class="partial">{NO_JOBS}</p>' in render_report(empty, "html")
    nlp_text = render_report(r, "text", team="nlp")
    assert "team nlp:" in nlp_text and "vision" not in nlp_text


def _text_and_html(m: EmailMessage) -> tuple[str, str]:
    text = m.get_body(("plain",))
    html = m.get_body(("html",))
    assert text is not None and html is not None
    return text.get_content().replace("\r\n", "\n"), html.get_content()


async def test_the_weekly_email_carries_the_section_and_a_teams_email_its_own_lines(tmp_path: Path) -> None:
    ctl, inbox = plain_smtp_server()
    try:
        settings = settings_from_mapping(
            {
                "store": {"path": str(tmp_path / "state.db")},
                "alerting": {
                    "receivers": [
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
                        }
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
        outcome, statuses = await send_reports(
            settings, StandIn(with_section()), IsoWeek.parse("2026-W47"), deliver_for=60
        )
        assert (outcome.enqueued, statuses) == (2, {"delivered": 2})
        by_rcpt = {rcpts[0]: m for (_, rcpts, _), m in zip(inbox.messages, inbox.parsed(), strict=True)}
    finally:
        ctl.stop()
    lead_text, lead_html = _text_and_html(by_rcpt["lead@x.example"])
    assert "WHAT IF" in lead_text and "  team nlp:\n" in lead_text and "  team vision:\n" in lead_text
    assert '<section id="what-if">' in lead_html and "<script>" not in lead_html
    nlp_text, nlp_html = _text_and_html(by_rcpt["nlp@x.example"])
    assert "WHAT IF" in nlp_text and "  team nlp:\n" in nlp_text and "vision" not in nlp_text
    assert '<section id="what-if">' in nlp_html and "vision" not in nlp_html
