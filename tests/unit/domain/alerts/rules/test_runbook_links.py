"""Every alert Watchtower raises links to a runbook section that exists."""

from __future__ import annotations

import re

from tests.fixtures import ROOT
from watchtower.config.model import Settings
from watchtower.domain.alerts.rules import ALERTNAMES
from watchtower.domain.alerts.rules.base import links

RUNBOOKS = ROOT / "docs" / "runbooks.md"


def _anchors(markdown: str) -> set[str]:
    """Return the anchors of the level-2 headings, as Markdown renderers derive them (lowercase, spaces to
    hyphens, punctuation dropped)."""
    out = set()
    for title in re.findall(r"^## (.+?)\s*$", markdown, flags=re.MULTILINE):
        slug = re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")
        out.add(slug)
    return out


def test_every_rules_runbook_url_points_at_a_section_of_docs_runbooks_md() -> None:
    anchors = _anchors(RUNBOOKS.read_text())
    settings = Settings().rule_settings()
    missing = {}
    for alertname in ALERTNAMES:
        url = links(settings, alertname, None)["runbook_url"]
        path, _, anchor = url.partition("#")
        assert path == settings.runbook_url and anchor, url
        if anchor not in anchors:
            missing[alertname] = anchor
    assert missing == {}, f"alerts whose runbook section is missing from {RUNBOOKS.name}: {missing}"


def test_the_gpu_alerts_are_among_the_rules_checked() -> None:
    assert {"GPUIdleWhileQueueWaits", "WatchtowerPrometheusUnreachable"} <= set(ALERTNAMES)
