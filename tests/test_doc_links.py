"""The README and docs/ link to each other and into the tree; a moved page or a renamed heading breaks a link
silently, so every relative link (and image) must name a file that exists and, with a #fragment, a heading
that file has, as GitHub derives heading anchors."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import unquote, urlsplit

import pytest
from markdown_it import MarkdownIt
from markdown_it.token import Token

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
MD = MarkdownIt("commonmark").enable("table")


def anchor(title: str) -> str:
    """Return a heading's anchor by GitHub's rule: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Return every heading anchor of a Markdown page, repeated titles numbered -1, -2, ... as GitHub does."""
    tokens = MD.parse(page.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    out: set[str] = set()
    for i, tok in enumerate(tokens):
        if tok.type == "heading_open":
            base = anchor(tokens[i + 1].content)
            n = seen.get(base, 0)
            seen[base] = n + 1
            out.add(base if n == 0 else f"{base}-{n}")
    return out


def targets(page: Path) -> list[str]:
    """Return the href of every link and the src of every image of a page, code spans and blocks excluded."""
    found: list[str] = []

    def walk(tokens: list[Token]) -> None:
        for tok in tokens:
            if tok.type == "link_open":
                found.append(str(tok.attrGet("href")))
            elif tok.type == "image":
                found.append(str(tok.attrGet("src")))
            if tok.children:
                walk(tok.children)

    walk(MD.parse(page.read_text(encoding="utf-8")))
    return found


def broken_links(page: Path) -> list[str]:
    """Return the relative links of a page that name no file, or a heading their file lacks."""
    broken = []
    for href in targets(page):
        parts = urlsplit(href)
        if parts.scheme or parts.netloc:
            continue  # an address on the web: not this checkout's to keep
        target = (page.parent / unquote(parts.path)).resolve() if parts.path else page
        if not target.exists():
            broken.append(f"{href}: no such file")
        elif parts.fragment and target.suffix == ".md" and unquote(parts.fragment) not in anchors(target):
            broken.append(f"{href}: {parts.path or page.name} has no heading with that anchor")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_relative_link_of_the_page_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_a_link_to_a_missing_file_or_heading_is_reported(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Title\n\n## A `code` heading: here\n", encoding="utf-8")
    page = tmp_path / "page.md"
    page.write_text(
        "[ok](other.md#a-code-heading-here) [gone](missing.md) [no heading](other.md#nowhere) "
        "[web](https://example.org/x.md) `[code](missing.md)`\n",
        encoding="utf-8",
    )
    assert broken_links(page) == [
        "missing.md: no such file",
        "other.md#nowhere: other.md has no heading with that anchor",
    ]
