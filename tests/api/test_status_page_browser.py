"""The status page in a real headless Chromium (Debian `chromium`), served by a real uvicorn."""

from __future__ import annotations

import html
import shutil
import subprocess
from pathlib import Path

import pytest
from services.scenario import HOSTILE

pytestmark = pytest.mark.browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--virtual-time-budget=3000",  # let any script the page might run, run, before the DOM is taken
]


def chromium(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    if not Path(CHROMIUM).exists():
        pytest.skip("chromium is not installed (tests/setup/system-deps.sh installs it)")
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )


def test_status_page_shows_every_section_and_a_hostile_annotation_as_inert_text(
    live: str, tmp_path: Path
) -> None:
    dom = chromium(tmp_path, "--dump-dom", f"{live}/").stdout
    # The payload is text on the page, escaped, and neither the script nor the onerror handler ran.
    assert html.escape(HOSTILE, quote=False) in dom
    assert "<title>Watchtower · GPU queue</title>" in dom
    assert "pwned" not in dom.split("<body>")[0]
    assert "<script" not in dom.replace("&lt;script", "")
    assert "<img" not in dom
    # What the page is for: every tier, why pending, preemptions, partial gangs, quota.
    for tier in ("critical", "high", "medium", "low"):
        assert f'id="tier-{tier}"' in dom
    assert "ops/debug-1" in dom and "no node fits" in dom
    assert "bert-worker-0" in dom  # the preemptor of old-batch-0
    assert 'id="partial-gangs"' in dom and "nlp/bert" in dom
    assert "gpu-quota" in dom and "refused by ResourceQuota gpu-quota" in dom


def test_status_page_screenshot_renders(live: str, tmp_path: Path) -> None:
    shot = tmp_path / "status.png"
    chromium(tmp_path, f"--screenshot={shot}", "--window-size=1400,1800", f"{live}/")
    data = shot.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000  # a blank page compresses to a few KB
