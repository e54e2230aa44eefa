"""The runbooks at `/runbooks`: docs/runbooks.md (shipped in the package) as HTML, one anchor per alert.

Alerts link `<external_url>/runbooks#<alertname in lower case>` unless `server.runbook_url` names runbooks
of one's own, so the link in a notification works as soon as the service runs.
"""

from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from markdown_it import MarkdownIt
from markdown_it.token import Token

from watchtower.domain.alerts.rules.base import RUNBOOKS_PATH

from .status_page import PageRenderer, page_response

router = APIRouter(tags=["runbooks"])


def slug(title: str) -> str:
    """Return a heading's anchor as Markdown renderers derive it (GitHub's rule, which docs/runbooks.md
    and tests/unit/api/routes/test_runbooks.py follow): lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def _heading_ids(tokens: list[Token]) -> None:
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open" and i + 1 < len(tokens):
            tok.attrSet("id", slug(tokens[i + 1].content))


def render(markdown: str) -> tuple[str, tuple[str, ...]]:
    """Return Markdown as HTML (raw HTML in it escaped, unsafe link schemes refused, each heading with its
    anchor as id) and the anchors of its level-2 sections, in order."""
    md = MarkdownIt("commonmark", {"html": False}).enable("table")
    tokens = md.parse(markdown)
    _heading_ids(tokens)
    anchors = tuple(str(t.attrGet("id")) for t in tokens if t.type == "heading_open" and t.tag == "h2")
    html: str = md.renderer.render(tokens, md.options, {})
    return html, anchors


@lru_cache(maxsize=1)
def runbooks_html() -> tuple[str, tuple[str, ...]]:
    """Return the shipped docs/runbooks.md rendered, with its section anchors (read and rendered once)."""
    return render(resources.files("watchtower.api").joinpath("runbooks.md").read_text(encoding="utf-8"))


@router.get(RUNBOOKS_PATH, response_class=HTMLResponse, include_in_schema=False)
def runbooks(request: Request) -> HTMLResponse:
    body, anchors = runbooks_html()
    renderer: PageRenderer = request.app.state.pages
    return page_response(renderer.render_page("runbooks.html", {"body": body, "anchors": anchors}))
