"""The status page in a real headless Chromium (Debian `chromium`), served by a real uvicorn."""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import html
import json
import shutil
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from tests.browser.cdp import HEADER_ALIGN, chromium_page
from tests.fixtures import FIXTURES
from tests.fixtures.scenario import HOSTILE, NOW, ManualClock, ReplaySource, demo_cluster, list_everything
from tests.unit.api.conftest import live_server
from tests.unit.api.test_openapi import scenario_gpu
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container
from watchtower.config.loading import settings_from_mapping
from watchtower.simulator import objects as o

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


MISSING_CLAIM = FIXTURES / "real" / "dra" / "missing-claim.json"


@contextlib.asynccontextmanager
async def every_table(tmp_path: Path, *extra: dict[str, Any]) -> AsyncIterator[str]:
    """Serve the status page with every table it has filled: the demo cluster (queue, partial gangs,
    quota, preemptions), alerting on with a webhook receiver (alerts, notifications queued), idle GPUs
    from a Prometheus stand-in, a 5-GPU pod where 8 are free but at most 4 on one node (fragmentation)
    and a pod whose DRA claim does not exist; and the `extra` objects."""

    secret = tmp_path / "hook-secret"
    secret.write_text("whsec_" + base64.b64encode(b"status page test secret!").decode())
    settings = settings_from_mapping(
        {
            "alerting": {
                "route": {"receiver": "oncall", "group_wait": "0s"},
                # Nothing is delivered: no delivery worker runs, the messages stay queued.
                "receivers": [
                    {
                        "name": "oncall",
                        "webhooks": [{"url": "http://127.0.0.1:9/hook", "secret_file": str(secret)}],
                    }
                ],
            }
        }
    )
    dra = [i for i in json.loads(MISSING_CLAIM.read_text())["items"] if i["kind"] != "Event"]
    cluster = demo_cluster().add(*dra, o.pod(name="wide", namespace="ops", created=NOW - 900, gpus=5), *extra)
    source = ReplaySource(cluster)
    clock = ManualClock()
    store = SQLiteAlertStore(tmp_path / "alerts.db")
    try:
        c = build_container(
            settings, clock=clock, source_health=source.feed_health, source_name="replay", alert_store=store
        )
        assert c.alerting is not None
        list_everything(c.queue_tracker, cluster)
        source.listed = set(cluster.objects)
        tick = c.queue_tracker.evaluate(clock.now())
        await c.alerting.on_tick(tick)
        gpu = scenario_gpu(c)
        await gpu.refresh(time.time())
        await gpu.on_snapshot(tick.snapshot, time.time())
        with live_server(create_app(dataclasses.replace(c, gpu=gpu))) as url:
            yield url
    finally:
        store.close()


async def test_status_page_numeric_headers_sit_over_their_right_aligned_figures(tmp_path: Path) -> None:
    async with every_table(tmp_path) as url:
        with chromium_page(f"{url}/", width=1400, mobile=False) as page:
            sections = page.evaluate("[...document.querySelectorAll('section[id]')].map(s => s.id)")
            columns = page.evaluate(HEADER_ALIGN)
            assert page.errors() == []
    tables = {
        "alerts",
        "partial-gangs",
        "quota",
        "notifications",
        "idle-gpus",
        "preemptions",
        "fragmentation",
    }
    assert set(sections) >= tables | {"tier-critical", "dra-problems"}, sections
    # Numeric columns are right-aligned and so are their headers (they once sat left over the figures),
    # in every table on the page; the text columns stay left under left headers.
    right = {c["header"] for c in columns if c["header_align"] == "right"}
    assert right == {
        "since",
        "wait vs threshold",
        "GPUs",
        "pods bound",
        "GPUs held",
        "wait",
        "used / hard",
        "when",
        "idle / used GPUs",
        "mean util.",
        "GPU-hours lost",
        "GPUs per pod",
        "free in total",
        "largest free on one node",
        "pending",
    }
    assert [c for c in columns if c["header_align"] != c["cell_align"]] == []
