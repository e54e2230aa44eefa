"""The one place a fairness report's format is chosen, for the API, the CLI and the page: each format's
renderer and media type. JSON is the API's own presenter; CSV, HTML and text are the report presenter's
(the composition root hands it in), so there is one CSV however the report is asked for."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from watchtower.domain.fairness.report import FairnessReport
from watchtower.ports import ReportPresenter

from .json_view import report_dict

Renderer = Callable[[FairnessReport, ReportPresenter | None, list[str] | None], bytes]


def _json(r: FairnessReport, _p: ReportPresenter | None, _teams: list[str] | None) -> bytes:
    return orjson.dumps(report_dict(r), option=orjson.OPT_INDENT_2) + b"\n"


def _presenter(p: ReportPresenter | None, fmt: str) -> ReportPresenter:
    if p is None:
        raise ValueError(f"the {fmt} report needs the report presenter, which this service does not have")
    return p


def _csv(r: FairnessReport, p: ReportPresenter | None, _teams: list[str] | None) -> bytes:
    return _presenter(p, "csv").csv(r).encode()


def _html(r: FairnessReport, p: ReportPresenter | None, teams: list[str] | None) -> bytes:
    return _presenter(p, "html").page(r, teams=teams).encode()


def _text(r: FairnessReport, p: ReportPresenter | None, teams: list[str] | None) -> bytes:
    return _presenter(p, "text").text(r, teams=teams).encode()


FORMATS: dict[str, tuple[Renderer, str]] = {
    "json": (_json, "application/json"),
    "csv": (_csv, "text/csv; charset=utf-8"),
    "html": (_html, "text/html; charset=utf-8"),
    "text": (_text, "text/plain; charset=utf-8"),
}


def unknown(fmt: str) -> str:
    return f"unknown report format {fmt!r} (formats: {', '.join(sorted(FORMATS))})"


def render(
    report: FairnessReport, fmt: str, *, presenter: ReportPresenter | None = None, team: str | None = None
) -> tuple[bytes, str]:
    """Return the report in `fmt` and its media type; raise ValueError naming the formats for another.

    `team` narrows the report to that team (a report built for one team already is)."""
    try:
        renderer, media = FORMATS[fmt]
    except KeyError:
        raise ValueError(unknown(fmt)) from None
    teams = [team] if team is not None else None
    if teams is not None:
        report = report.for_teams(teams)
    return renderer(report, presenter, teams), media
