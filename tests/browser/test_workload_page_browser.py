"""A workload's page in a real headless Chromium, served by a real uvicorn."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from tests.browser.cdp import HEADER_ALIGN, chromium_page
from tests.browser.test_status_page_browser import chromium, every_table
from tests.fixtures.scenario import HOSTILE
from tests.unit.api.conftest import live_server
from tests.unit.api.test_dra_page import real_objects
from tests.unit.api.test_gangs_shown import service as gangs_service

pytestmark = pytest.mark.browser


def test_a_workloads_page_renders_with_a_hostile_annotation_as_inert_text(live: str, tmp_path: Path) -> None:
    dom = chromium(tmp_path, "--dump-dom", f"{live}/workloads/ops/debug-1").stdout
    assert "<title>Watchtower · ops/debug-1</title>" in dom  # no script rewrote it
    assert html.escape(HOSTILE, quote=False) in dom
    assert "<script" not in dom.replace("&lt;script", "") and "<img" not in dom
    for section in ("wait", "why", "pods", "preemptions", "alerts"):
        assert f'id="{section}"' in dom
    shot = tmp_path / "workload.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1200,1100", f"{live}/workloads/nlp/bert")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a blank page compresses to a few KB


async def test_a_workloads_numeric_headers_sit_over_their_right_aligned_figures(tmp_path: Path) -> None:
    # Every table a workload's page has, over pages that between them show all: why pending and alerts
    # (debug-1), GPUs held (bert), preemptions suffered (old-batch-0), DRA claims (holder), a Volcano
    # queue's entitlement (ocr-train).
    pages = ["/workloads/ops/debug-1", "/workloads/nlp/bert", "/workloads/vision/old-batch-0"]
    columns: list[dict[str, str]] = []
    async with every_table(tmp_path, *real_objects()) as url:
        for path in [*pages, "/workloads/e2e-dra/holder"]:
            with chromium_page(f"{url}{path}", width=1200, mobile=False) as page:
                columns += page.evaluate(HEADER_ALIGN)
                assert page.errors() == []
    with (
        live_server(gangs_service().app) as url,
        chromium_page(f"{url}/workloads/nlp/ocr-train", width=1200) as page,
    ):
        columns += page.evaluate(HEADER_ALIGN)
    right = {c["header"] for c in columns if c["header_align"] == "right"}
    assert right == {"nodes", "since", "GPUs held", "GPUs", "GPU-hours lost"}, columns
    assert [c for c in columns if c["header_align"] != c["cell_align"]] == []
