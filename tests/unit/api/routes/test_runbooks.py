"""The runbooks the service serves at /runbooks: the section every alert links to is there."""

from __future__ import annotations

import re
from importlib import resources

import httpx

from tests.fixtures import ROOT
from watchtower.api.routes.runbooks import render
from watchtower.api.routes.status_page import CSP
from watchtower.config.model import Settings
from watchtower.domain.alerts.rules import ALERTNAMES
from watchtower.domain.alerts.rules.base import RUNBOOKS_PATH, links

DOCS = ROOT / "docs" / "runbooks.md"


async def test_the_runbooks_page_has_the_section_every_alert_links_to(client: httpx.AsyncClient) -> None:
    r = await client.get("/runbooks")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    assert r.headers["content-security-policy"] == CSP
    ids = set(re.findall(r'<h2 id="([^"]+)"', r.text))
    settings = Settings().rule_settings()
    missing = {}
    for alertname in ALERTNAMES:
        url = links(settings, alertname, None)["runbook_url"]
        base, _, anchor = url.partition("#")
        assert base == "http://127.0.0.1:8080" + RUNBOOKS_PATH, url
        if anchor not in ids:
            missing[alertname] = anchor
    assert missing == {}, f"alerts whose section /runbooks lacks: {missing}"
    assert '<h2 id="workloadwaitcritical">workloadwaitcritical</h2>' in r.text
    assert 'href="#workloadwaitwarning"' in r.text  # the links between sections work on the page too


def test_the_package_ships_the_runbooks_of_docs() -> None:
    shipped = resources.files("watchtower.api").joinpath("runbooks.md").read_text(encoding="utf-8")
    assert shipped == DOCS.read_text(encoding="utf-8")


def test_markdown_cannot_put_markup_or_script_links_on_the_page() -> None:
    body, anchors = render(
        '## Oops <img src=x onerror="alert(1)">\n\n<script>alert(1)</script>\n\n[x](javascript:alert(1))\n'
    )
    assert "<script" not in body and "<img" not in body and 'href="javascript' not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert anchors == ("oops-img-srcx-onerroralert1",)
