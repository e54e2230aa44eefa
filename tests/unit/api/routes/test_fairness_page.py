"""`/reports/fairness/{week}`: the report page, one team's, its charts, the status page's link, and a clear
page for every bad request."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator

import httpx
import pytest

from tests.reports.sample import HOSTILE_TEAM
from tests.reports.service import report_app
from watchtower.ports import PromReadError


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    app, _ = report_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w.test") as c:
        yield c


async def test_the_page_serves_the_report_with_its_charts_inline(client: httpx.AsyncClient) -> None:
    r = await client.get("/reports/fairness/2026-W47")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert "img-src data:" in r.headers["content-security-policy"]
    assert "<title>Watchtower fairness report 2026-W47: cluster</title>" in r.text
    assert len(re.findall(r'<img class="chart" src="data:image/png;base64,', r.text)) == 4
    assert "<script" not in r.text


async def test_one_teams_page_and_a_hostile_teams_page(client: httpx.AsyncClient) -> None:
    r = await client.get("/reports/fairness/2026-W47", params={"team": "vision"})
    assert r.status_code == 200 and "team vision" in r.text and "nlp-serving" not in r.text
    assert 'href="/reports/fairness/2026-W47">whole report</a>' in r.text
    r = await client.get("/reports/fairness/2026-W47", params={"team": HOSTILE_TEAM})
    assert r.status_code == 200 and "<script>" not in r.text and "&lt;script&gt;" in r.text


async def test_a_chart_is_served_alone_as_png(client: httpx.AsyncClient) -> None:
    r = await client.get("/reports/fairness/2026-W47/charts/shares.png")
    assert r.status_code == 200 and r.headers["content-type"] == "image/png" and r.content[:4] == b"\x89PNG"
    r = await client.get("/reports/fairness/2026-W47/charts/nope.png")
    assert r.status_code == 404 and "no chart named &#39;nope&#39;" in r.text


@pytest.mark.parametrize(
    ("path", "status", "words"),
    [
        ("/reports/fairness/2026-47", 400, "not an ISO week (expected YYYY-Www"),
        ("/reports/fairness/2026-W54", 400, "2026 has no ISO week 54"),
        ("/reports/fairness/%3Cscript%3E", 400, "&#39;&lt;script&gt;&#39;"),
        ("/reports/fairness/2030-W01", 404, "the week 2030-W01 has not begun"),
        (
            "/reports/fairness/2026-W47?team=nobody",
            404,
            "no team named &#39;nobody&#39; had work in 2026-W47",
        ),
        ("/reports/fairness/2026-W47?team=" + "x" * 300, 400, "a team name is 1 to 253 characters"),
    ],
)
async def test_bad_requests_get_a_page_that_says_what_was_wrong(
    client: httpx.AsyncClient, path: str, status: int, words: str
) -> None:
    r = await client.get(path)
    assert r.status_code == status
    assert r.headers["content-type"].startswith("text/html") and words in r.text
    assert 'href="/reports/fairness/2027-W01">the report of 2027-W01</a>' in r.text  # the last complete week
    assert "<script>" not in r.text


async def test_prometheus_down_is_a_503_page() -> None:
    app, source = report_app()
    source.fail = PromReadError("connection refused")
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w.test") as c:
        r = await c.get("/reports/fairness/2026-W47")
    assert r.status_code == 503 and "needs Prometheus: connection refused" in r.text


async def test_the_status_page_links_the_last_complete_week_and_without_a_report_neither_link_nor_page() -> (
    None
):
    app, _ = report_app()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w.test") as c:
        page = (await c.get("/")).text
    assert '<a id="fairness-report" href="/reports/fairness/2027-W01">fairness report 2027-W01</a>' in page
    app, _ = report_app(with_report=False)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://w.test") as c:
        assert 'id="fairness-report"' not in (await c.get("/")).text
        r = await c.get("/reports/fairness/2026-W47")
    assert r.status_code == 404 and "This service offers no fairness report" in r.text
