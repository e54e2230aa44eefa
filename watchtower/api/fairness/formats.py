"""The one place a fairness report's format is chosen, for the API and the CLI: each format's renderer
and media type. HTML (and the email) register here too."""

from __future__ import annotations

from collections.abc import Callable

import orjson

from watchtower.domain.fairness.report import FairnessReport

from .csv_view import report_csv
from .json_view import report_dict

Renderer = Callable[[FairnessReport], bytes]


def _json(r: FairnessReport) -> bytes:
    return orjson.dumps(report_dict(r), option=orjson.OPT_INDENT_2) + b"\n"


def _csv(r: FairnessReport) -> bytes:
    return report_csv(r).encode()


FORMATS: dict[str, tuple[Renderer, str]] = {
    "json": (_json, "application/json"),
    "csv": (_csv, "text/csv; charset=utf-8"),
}


def render(report: FairnessReport, fmt: str) -> tuple[bytes, str]:
    """Return the report in `fmt` and its media type; raise ValueError naming the formats for another."""
    try:
        renderer, media = FORMATS[fmt]
    except KeyError:
        raise ValueError(f"unknown format {fmt!r} (formats: {', '.join(sorted(FORMATS))})") from None
    return renderer(report), media
