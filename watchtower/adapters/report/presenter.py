"""The weekly report as HTML (one template for the page and the email) and as plain text, with its charts.

Jinja2 escapes every value in the HTML; the text form puts every value on one line, so a name holding CR/LF
cannot forge lines of the report. Charts are referenced through `img(name)`: a `data:` URI on the page (the
page's CSP allows images from data: only), `cid:` in the email.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import jinja2

from watchtower.domain.fairness.mail import Attachment, InlineImage, ReportMail
from watchtower.domain.fairness.recipients import one_line
from watchtower.domain.fairness.report import FairnessReport

from . import charts
from .csv_export import report_csv
from .view import report_view

TEMPLATES = Path(__file__).parent / "templates"


def _flat(value: object) -> object:
    return one_line(value, 500) if isinstance(value, str) else value


def _envs() -> tuple[jinja2.Environment, jinja2.Environment]:
    loader = jinja2.FileSystemLoader(str(TEMPLATES))
    html = jinja2.Environment(loader=loader, autoescape=True, undefined=jinja2.StrictUndefined)
    # The text part is plain text, shown as written: escaping would print &lt; for every <.
    text = jinja2.Environment(
        loader=loader,
        autoescape=False,  # noqa: S701
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        finalize=_flat,
    )
    return html, text


def for_teams(report: FairnessReport, teams: Iterable[str] | None) -> FairnessReport:
    """Return the report narrowed to `teams` (None: all of them); the cluster part stays whole."""
    return report if teams is None else report.for_teams(teams)


def title_of(report: FairnessReport, teams: Sequence[str] | None) -> str:
    """Return the report's title (and email subject), one line whatever the team names hold."""
    if teams is None:
        scope = "cluster"
    elif len(teams) == 1:
        scope = f"team {teams[0]}"
    else:
        scope = "teams " + ", ".join(teams)
    return one_line(f"Watchtower fairness report {report.week}: {scope}", 160)


class FairnessPresenter:
    """Renders a report: the page, the email, the text, the CSV and the charts (ports.ReportPresenter)."""

    def __init__(self) -> None:
        self.html_env, self.text_env = _envs()

    def charts(self, report: FairnessReport) -> dict[str, bytes]:
        return {name: draw(report) for name, draw in charts.CHARTS.items()}

    def chart(self, report: FairnessReport, name: str) -> bytes | None:
        draw = charts.CHARTS.get(name)
        return None if draw is None else draw(report)

    def html(
        self,
        report: FairnessReport,
        *,
        img: Callable[[str], str],
        teams: Sequence[str] | None = None,
        links: Sequence[tuple[str, str]] = (),
        footer: str = "",
    ) -> str:
        return self.html_env.get_template("fairness.html.j2").render(
            title=title_of(report, teams),
            v=report_view(report),
            img=img,
            charts=set(charts.CHARTS),
            sizes=charts.chart_heights(report),
            page_links=list(links),
            footer=footer,
        )

    def page(
        self,
        report: FairnessReport,
        *,
        teams: Sequence[str] | None = None,
        links: Sequence[tuple[str, str]] = (),
    ) -> str:
        """Return the page of the report narrowed to `teams`: the HTML with each chart inline as a data: URI,
        so it needs no second request."""
        report = for_teams(report, teams)
        pngs = self.charts(report)
        uris = {n: "data:image/png;base64," + base64.b64encode(b).decode() for n, b in pngs.items()}
        return self.html(report, img=uris.__getitem__, teams=teams, links=links)

    def text(self, report: FairnessReport, *, teams: Sequence[str] | None = None, footer: str = "") -> str:
        ctx: dict[str, Any] = {"title": title_of(report, teams), "v": report_view(report), "footer": footer}
        return self.text_env.get_template("fairness.txt.j2").render(ctx)

    def csv(self, report: FairnessReport) -> str:
        return report_csv(report)

    def mail(
        self,
        report: FairnessReport,
        *,
        to: Sequence[str],
        teams: Sequence[str] | None,
        key: str,
        footer: str = "",
    ) -> ReportMail:
        """Return the email of a report narrowed to `teams` (None: the whole report) for `to`."""
        part = for_teams(report, teams)
        pngs = self.charts(part)
        scope = "cluster" if teams is None else "-".join(teams)
        return ReportMail(
            subject=title_of(report, teams),
            to=tuple(to),
            text=self.text(part, teams=teams, footer=footer),
            html=self.html(part, img=lambda n: f"cid:{content_id(n)}", teams=teams, footer=footer),
            images=tuple(InlineImage(content_id(n), b) for n, b in pngs.items()),
            attachments=(
                Attachment(_filename(report.week, scope), "text/csv", self.csv(part).encode("utf-8")),
            ),
            message_id_key=key,
        )


def content_id(chart: str) -> str:
    """Return the Content-ID (without its angle brackets) a chart's inline image carries."""
    return f"{chart}.chart@fairness.watchtower"


def _filename(week: str, scope: str) -> str:
    safe = "".join(c if c.isascii() and (c.isalnum() or c in "-_.") else "_" for c in scope)[:60]
    return f"fairness-{week}-{safe or 'teams'}.csv"
