"""Gang-held work on the pages in a real headless Chromium at phone width, served by a real uvicorn."""

from __future__ import annotations

import html
import os
from pathlib import Path

import pytest

from tests.browser.test_status_page_browser import chromium
from tests.fixtures.scenario import HOSTILE
from tests.unit.api.conftest import live_server
from tests.unit.api.test_gangs_shown import service

pytestmark = pytest.mark.browser
SHOTS = os.environ.get("WATCHTOWER_SCREENSHOTS", "")  # a directory to keep the screenshots in, to look at


def test_the_volcano_queue_and_the_source_render_at_phone_width(tmp_path: Path) -> None:
    with live_server(service().app) as live:
        dom = chromium(tmp_path, "--dump-dom", f"{live}/workloads/nlp/ocr-train").stdout
        assert 'id="volcano-queue"' in dom and "Volcano queue vision-q" in dom
        assert "Volcano PodGroup ocr-train in queue vision-q" in dom
        odd = chromium(tmp_path, "--dump-dom", f"{live}/workloads/ops/odd-queue").stdout
        assert html.escape(f"Volcano queue {HOSTILE}", quote=False) in odd
        assert "<script" not in odd.replace("&lt;script", "") and "<img" not in odd
        for page, url in (("workload", "/workloads/nlp/ocr-train"), ("status", "/")):
            shot = tmp_path / f"{page}-phone.png"
            chromium(tmp_path, f"--screenshot={shot}", "--window-size=390,2400", f"{live}{url}")
            data = shot.read_bytes()
            assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000
            if SHOTS:
                (Path(SHOTS) / shot.name).write_bytes(data)
