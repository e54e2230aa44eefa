"""The fleet page in a real headless Chromium (Debian `chromium`): two replicas served by real uvicorns, one
listing the other and a cluster that never answers; a hostile cluster name stays inert text."""

from __future__ import annotations

import html
from pathlib import Path

import pytest

from tests.browser.cdp import chromium_page
from tests.browser.test_status_page_browser import chromium
from tests.fixtures.scenario import HOSTILE
from tests.unit.api.conftest import live_server
from tests.unit.api.test_fleet_page import _service, silent_server
from watchtower.config import settings_from_mapping

pytestmark = pytest.mark.browser


def test_the_fleet_page_shows_the_answering_cluster_names_the_silent_one_and_runs_no_script(
    tmp_path: Path,
) -> None:
    _, other = _service(settings_from_mapping({"cluster": {"name": "prod-b"}}, env={}))
    with live_server(other) as b, silent_server() as dead:  # type: ignore[arg-type]
        settings = settings_from_mapping(
            {
                "cluster": {"name": HOSTILE},
                "fleet": {
                    "clusters": [{"name": "prod-b", "url": b}, {"name": "prod-c", "url": dead}],
                    "timeout": "1s",
                },
            },
            env={},
        )
        _, here = _service(settings)
        with live_server(here) as url:  # type: ignore[arg-type]
            dom = chromium(tmp_path, "--dump-dom", f"{url}/fleet").stdout
    assert "<title>Watchtower · fleet</title>" in dom  # no script renamed it
    assert html.escape(HOSTILE, quote=False) in dom
    assert "<img" not in dom and "<script" not in dom.replace("&lt;script", "")
    assert f'<a href="{b}/">prod-b</a>' in dom
    assert dom.count('class="cluster"') == 3
    assert "Not answering" in dom and "no answer within 1 s" in dom


@pytest.mark.parametrize("width", [390, 1300])
def test_the_fleet_table_of_four_tiers_scrolls_in_its_own_box_not_the_page(
    tmp_path: Path, width: int
) -> None:
    # Twelve columns with headers that do not wrap ran 200 px past a 1300 px window (2026-12-07).
    _, other = _service(settings_from_mapping({"cluster": {"name": "prod-b"}}, env={}))
    with live_server(other) as b:  # type: ignore[arg-type]
        settings = settings_from_mapping(
            {"cluster": {"name": "prod-a"}, "fleet": {"clusters": [{"name": "prod-b", "url": b}]}}, env={}
        )
        _, here = _service(settings)
        with live_server(here) as url, chromium_page(f"{url}/fleet", width=width, mobile=False) as page:  # type: ignore[arg-type]
            scroll, inner = page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
            box = page.evaluate("document.querySelector('.wide').getBoundingClientRect().right")
            headers = page.evaluate("[...document.querySelectorAll('th.tier')].map(h => h.textContent)")
            page.screenshot(tmp_path / f"fleet-{width}.png")
    assert scroll <= inner == width, (scroll, inner)
    assert box <= width + 0.5
    assert headers == ["critical", "high", "medium", "low"]
