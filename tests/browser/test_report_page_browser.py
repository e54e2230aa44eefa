"""The report page in a real headless Chromium over a real uvicorn: the charts load as images, nothing is
reported on the console, and at phone width (390 px) the page body never scrolls sideways."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.browser.cdp import HEADER_ALIGN, chromium_page
from tests.reports.sample import HOSTILE_TEAM
from tests.reports.service import report_app
from tests.unit.api.conftest import live_server

pytestmark = pytest.mark.browser

# Where the screenshots are kept for a person to look at (set WATCHTOWER_SCREENSHOTS to keep them).
SHOTS = os.environ.get("WATCHTOWER_SCREENSHOTS")


def shot_path(tmp_path: Path, name: str) -> Path:
    return Path(SHOTS) / name if SHOTS else tmp_path / name


IMAGES = "[...document.images].map(i => ({ok: i.complete && i.naturalWidth > 0, w: i.naturalWidth, right: i.getBoundingClientRect().right, src: i.src.slice(0, 22)}))"


@pytest.mark.parametrize("width", [390, 1280])
def test_the_report_page_loads_its_charts_without_errors_and_fits_the_width(
    tmp_path: Path, width: int
) -> None:
    app, _ = report_app()
    with live_server(app) as base, chromium_page(f"{base}/reports/fairness/2026-W47", width=width) as page:
        images = page.evaluate(IMAGES)
        assert len(images) == 4
        assert all(i["ok"] and i["w"] == 640 and i["src"] == "data:image/png;base64," for i in images), images
        assert all(i["right"] <= width + 0.5 for i in images), images  # shrunk to the width, not overflowing
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner == width, (scroll, inner)
        # Tables wider than the screen scroll in their own box, never the body.
        boxes = page.evaluate(
            "[...document.querySelectorAll('.scroll')].map(b => b.getBoundingClientRect().right)"
        )
        assert boxes and max(boxes) <= width + 0.5
        assert page.evaluate("document.title") == "Watchtower fairness report 2026-W47: cluster"
        # Numeric columns are right-aligned and so are their headers (they once sat left over the figures).
        columns = page.evaluate(HEADER_ALIGN)
        assert len(columns) > 20 and {c["header"] for c in columns} >= {
            "Jain's index",
            "p95",
            "hours present",
        }
        assert [c for c in columns if c["header_align"] != c["cell_align"]] == []
        assert any(c["cell_align"] == "right" for c in columns)
        assert page.errors() == []
        png = page.screenshot(shot_path(tmp_path, f"fairness-report-{width}.png"))
        assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 50_000


def test_a_hostile_team_page_runs_nothing_and_shows_the_name_as_text(tmp_path: Path) -> None:
    app, _ = report_app()
    from urllib.parse import quote

    with (
        live_server(app) as base,
        chromium_page(f"{base}/reports/fairness/2026-W47?team={quote(HOSTILE_TEAM)}", width=390) as page,
    ):
        assert page.evaluate("document.querySelectorAll('script').length") == 0
        heading = page.evaluate("document.querySelector('.team h3').textContent")
        assert heading.startswith('=cmd|<script>alert("x")</script>')
        scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
        assert scroll <= inner
        assert page.errors() == []
        page.screenshot(shot_path(tmp_path, "fairness-report-hostile-390.png"))
