"""A workload's page in a real headless Chromium, served by a real uvicorn."""

from __future__ import annotations

import html
from pathlib import Path

import pytest
from services.scenario import HOSTILE

from .test_status_page_browser import chromium

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
