"""`GET /api/v1/reports/fairness` through the real app (its routes, dependencies and presenters), on a
service with a real SQLite history and no Prometheus: good weeks, bad weeks, teams that are not there."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterator
from datetime import UTC
from pathlib import Path

import httpx
import pytest

from tests.fixtures.scenario import NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.adapters.report.csv_export import FIXED
from watchtower.api.app import create_app
from watchtower.api.schemas import FairnessReport
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.domain.fairness.history import WaitEpisode
from watchtower.domain.fairness.week import IsoWeek

TZ_WEEK = IsoWeek.containing(NOW, UTC)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    history = SQLiteFairnessHistory(tmp_path / "watchtower.db")
    start, _ = TZ_WEEK.previous().bounds(UTC)
    history.record(
        [
            WaitEpisode(
                "wait:x", "pod", "vision", "vision", "low", "Job/x", 2, start + 60, start + 660, "scheduled"
            ),
            WaitEpisode(
                "wait:z", "pod", "=sum(A1)", "=sum(A1)", "low", "Pod/z", 1, start + 60, start + 120, "gone"
            ),
            WaitEpisode(
                "wait:y", "quota", "nlp", "language", "high", "Job/y", 8, start + 60, None, "waiting"
            ),
        ]
    )
    clock = ManualClock(NOW)
    source = ReplaySource(demo_cluster())
    c = build_container(
        Settings(), clock=clock, source_health=source.feed_health, source_name="replay", history=history
    )
    list_everything(c.queue_tracker, source.cluster)
    c.queue_tracker.evaluate(NOW)
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(c)), base_url="http://wt.test"
    ) as cl:
        yield cl
    history.close()


async def test_the_default_week_is_the_last_complete_one_and_matches_its_schema(
    client: httpx.AsyncClient,
) -> None:
    r = await client.get("/api/v1/reports/fairness")
    assert r.status_code == 200, r.text
    doc = r.json()
    FairnessReport.model_validate(doc)  # every key declared
    assert doc["week"] == str(TZ_WEEK.previous())
    teams = {t["team"]: t for t in doc["teams"]}
    # The live cluster's teams and namespaces are there, the history's waits too; no Prometheus: usage missing.
    assert teams["vision"]["namespaces"] == ["vision"] and teams["ops"]["namespaces"] == ["ops"]
    assert teams["vision"]["waits"][0]["p50_seconds"] == 600
    assert teams["language"]["waits"][0]["censored"] == 1
    assert teams["vision"]["used_gpu_hours"] is None and doc["cluster"]["jain"] is None
    assert doc["partial"] is True  # the history has no heartbeat in that week
    assert any("no Prometheus configured" in n for n in doc["notes"])
    assert "nearest rank" in doc["method"]["percentiles"]


async def test_one_team(client: httpx.AsyncClient) -> None:
    r = await client.get(
        "/api/v1/reports/fairness", params={"week": str(TZ_WEEK.previous()), "team": "language"}
    )
    assert r.status_code == 200
    assert [t["team"] for t in r.json()["teams"]] == ["language"]


@pytest.mark.parametrize(
    ("week", "words"),
    [
        ("2026-47", "not an ISO week (expected YYYY-Www"),
        ("2026-W54", "2026 has no ISO week 54"),
        ("<b>", "not an ISO week"),
    ],
)
async def test_a_bad_week_is_a_400_that_says_the_form(
    client: httpx.AsyncClient, week: str, words: str
) -> None:
    r = await client.get("/api/v1/reports/fairness", params={"week": week})
    assert r.status_code == 400
    assert words in r.json()["detail"]


async def test_an_unknown_team_is_a_404_naming_the_teams(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/reports/fairness", params={"team": "nobody"})
    assert r.status_code == 404
    assert "no team 'nobody'" in r.json()["detail"] and "language" in r.json()["detail"]


async def test_csv_has_one_row_per_team_and_no_formula_cells(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/reports/fairness", params={"format": "csv"})
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/csv")
    table = list(csv.reader(io.StringIO(r.text)))
    # The one CSV presenter's columns: every figure, the waits and preemptions per tier of the week.
    assert tuple(table[0][: len(FIXED)]) == FIXED
    assert {"waits_censored_high", "wait_p95_s_low"} <= set(table[0])
    # A team named like a spreadsheet formula is quoted so that it stays text.
    assert sorted(row[1] for row in table[1:]) == ["'=sum(A1)", "language", "ops", "vision"]
    assert all(not cell.startswith(("=", "+", "@")) for row in table for cell in row)
    bad = await client.get("/api/v1/reports/fairness", params={"format": "pdf"})
    assert bad.status_code == 400 and "formats: csv, html, json, text" in bad.json()["detail"]


async def test_the_report_is_in_the_openapi_schema(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    op = spec["paths"]["/api/v1/reports/fairness"]["get"]
    assert {"200", "400", "404"} <= set(op["responses"])
    assert "FairnessReport" in spec["components"]["schemas"]


async def test_the_page_the_json_and_the_text_are_the_same_report_service(client: httpx.AsyncClient) -> None:
    """The page reads the container's report source, which is the service the JSON reads."""
    week = str(TZ_WEEK.previous())
    js = (await client.get("/api/v1/reports/fairness", params={"week": week})).json()
    page = await client.get(f"/reports/fairness/{week}")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert {t["team"] for t in js["teams"]} == {"=sum(A1)", "language", "ops", "vision"}
    text = await client.get("/api/v1/reports/fairness", params={"week": week, "format": "text"})
    assert text.status_code == 200
    for team in js["teams"]:
        assert f"TEAM {team['team']}" in text.text and team["team"] in page.text
    this_week = await client.get(f"/reports/fairness/{TZ_WEEK}")
    assert this_week.status_code == 200


async def test_a_week_not_begun_is_a_404_as_on_the_page(client: httpx.AsyncClient) -> None:
    r = await client.get("/api/v1/reports/fairness", params={"week": "2099-W01"})
    assert r.status_code == 404 and "has not begun" in r.json()["detail"]
    page = await client.get("/reports/fairness/2099-W01")
    assert page.status_code == 404
