"""The report's HTML, text and charts, from hand-made reports: every figure shown, missing ones as
"missing", partial coverage marked, hostile names inert, charts deterministic PNGs."""

from __future__ import annotations

import dataclasses
import re
import struct
from typing import Any

import pytest
from markupsafe import escape
from matplotlib.figure import Figure

from tests.reports.sample import HOSTILE_NS, nlp, report, vision
from watchtower.adapters.report import charts as report_charts
from watchtower.adapters.report.presenter import FairnessPresenter
from watchtower.domain.fairness.report import FairnessReport, GpuHoursBreakdown

P = FairnessPresenter()
# matplotlib warns where it gives up on a layout ("Tight layout not applied"): a label is then cut off.
pytestmark = pytest.mark.filterwarnings("error::UserWarning")


def page(**kw: object) -> str:
    return P.page(report(**kw))  # type: ignore[arg-type]


def test_coverage_comes_first_and_a_partial_week_is_marked() -> None:
    doc = page()
    assert (
        doc.index('id="coverage"')
        < doc.index('id="cluster"')
        < doc.index('id="teams"')
        < doc.index('id="method"')
    )
    assert "Partial coverage" in doc
    assert re.search(
        r"dcgm-exporter</td><td class=\"num\">150\.5</td><td class=\"num\">168\.0</td><td class=\"num\">89\.6 % \(partial\)",
        doc,
    )
    full = dataclasses.replace(report(), coverage=report().coverage[:1])
    assert "Partial coverage" not in P.page(full)


def test_the_cluster_part_has_jain_both_weeks_the_breakdown_and_the_trend() -> None:
    doc = page()
    assert "<b>0.912</b> this week, 0.874 last week" in doc
    for label, value in (
        ("allocated, idle (under θ)", "705.6"),
        ("free while work waited (planned)", "1,200.0"),
        ("nodes down or cordoned", "672.0"),
    ):
        assert f'<td>{label}</td><td class="num">{value}</td>' in doc
    assert doc.count("<td>2026-W") == 8
    assert '<td>2026-W42</td><td class="num">missing</td>' in doc  # a week without Jain's index


def test_every_team_figure_is_shown_and_a_missing_one_says_missing_never_zero() -> None:
    doc = page()
    for label in (
        "GPU-hours used (U)",
        "entitlement (E)",
        "attainment U/E",
        "borrowed",
        "lent",
        "demand (D)",
        "fair share (F)",
        "satisfaction x",
        "dominant resource",
        "gpu share",
        "cpu share",
        "memory share",
        "preemptions suffered",
        "preemptions caused",
        "GPU-hours lost to preemption",
        "idle-allocated GPU-hours",
        "idle-allocated share",
        "starvation incidents",
        "gang stalls",
    ):
        assert doc.count(f"<td>{label}</td>") == 3, label
    assert '<td>attainment U/E</td><td class="num">60.0 %</td>' in doc  # vision: 2016 / 3360
    assert '<td>GPU-hours used (U)</td><td class="num missing">missing</td>' in doc  # the hostile team
    assert '<td>satisfaction x</td><td class="num">no demand</td>' in doc
    assert "Some of this team's figures are missing" in doc
    # Waits with the censored ones counted, the lists of long-running and waiting work.
    assert (
        '<td>low</td><td class="num">30</td><td class="num">30m</td><td class="num">4h</td><td class="num">5h33m</td><td class="num">2</td><td class="num">1d2h</td>'
        in doc
    )
    assert "team-vision/PaddleJob/pretrain" in doc and "team-vision/Job/batch-0005" in doc


def test_the_method_section_prints_the_formulas_and_thresholds_in_force() -> None:
    doc = page()
    assert "min(1, U / min(D, F))" in doc and "(Σx)² / (n·Σx²)" in doc
    assert "θ = 10 %" in doc and "critical 5m, high 15m, medium 30m, low 2h" in doc
    assert "long-running after 3d" in doc and "auto: ResourceQuota GPUs" in doc


def test_hostile_team_and_namespace_names_are_escaped_text() -> None:
    doc = page()
    assert "<script>" not in doc and "<b>bold</b>" not in doc and "<img src=x" not in doc
    assert str(escape(HOSTILE_NS)) == "ns-&#34;quoted&#34;-&lt;b&gt;bold&lt;/b&gt;"
    assert "ns-&#34;quoted&#34;-&lt;b&gt;bold&lt;/b&gt;" in doc
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in doc
    assert str(escape('Job/<img src=x onerror="alert(1)">')) in doc


def test_the_page_inlines_its_four_charts_as_data_uris() -> None:
    doc = page()
    srcs = re.findall(r'<img class="chart" src="([^"]+)"', doc)
    assert len(srcs) == 4 and all(s.startswith("data:image/png;base64,") for s in srcs)


def test_a_team_page_narrows_to_the_team_and_says_so() -> None:
    doc = P.page(report(), teams=["vision"])
    assert "<title>Watchtower fairness report 2026-W47: team vision</title>" in doc
    assert "team-vision" in doc and "nlp-serving" not in doc


def test_the_text_part_keeps_every_value_on_one_line() -> None:
    text = P.text(report())
    assert "Bcc: victim@evil.example" in text  # the name is there, flattened
    assert not any(line.startswith("Bcc:") for line in text.splitlines())
    assert "GPU-hours used (U): missing" in text and "attainment U/E: 150.0 %" in text
    assert "Partial coverage" in text and "dcgm-exporter: 150.5 of 168.0 h (89.6 %) PARTIAL" in text


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", data[16:24])


@pytest.mark.parametrize("name", sorted(report_charts.CHARTS))
def test_each_chart_is_a_deterministic_png_of_the_size_the_html_reserves(name: str) -> None:
    r = report()
    a, b = report_charts.chart(r, name), report_charts.chart(r, name)
    assert a == b
    assert png_size(a) == (640, report_charts.chart_heights(r)[name])
    assert b"Software" not in a[:200]


def test_charts_draw_names_that_look_like_mathtext_and_weeks_with_nothing() -> None:
    odd = dataclasses.replace(vision(), team="cost $ 5 $\\alpha$ \\ $")
    r = report(teams=(odd, nlp()))
    assert png_size(report_charts.shares_chart(r))[0] == 640
    empty = report(teams=())
    empty = dataclasses.replace(empty, cluster=dataclasses.replace(empty.cluster, trend=()))
    for draw in report_charts.CHARTS.values():
        assert png_size(draw(empty))[0] == 640


def test_a_missing_used_figure_changes_the_shares_chart_not_to_a_zero_bar() -> None:
    # The same team with U missing draws differently from U = 0: "missing" is written where the bar is.
    gone = report_charts.shares_chart(report(teams=(vision(used=None),)))
    zero = report_charts.shares_chart(report(teams=(vision(used=0.0),)))
    assert gone != zero


def _with_breakdown(**parts: float | None) -> FairnessReport:
    r = report()
    return dataclasses.replace(
        r, cluster=dataclasses.replace(r.cluster, breakdown=dataclasses.replace(r.cluster.breakdown, **parts))
    )


NOTHING = dict.fromkeys(
    ("capacity", "allocated_busy", "allocated_idle", "planned", "free_idle", "unavailable"), None
)
CHART_CASES = {
    "all known": report(),
    "idle missing (no DCGM)": _with_breakdown(allocated_busy=None, allocated_idle=None),
    "every part missing": _with_breakdown(**NOTHING),
    # The demo's first report: its past week alone has data (the trend once autoscaled to it).
    "only this week in the trend": dataclasses.replace(
        report(),
        cluster=dataclasses.replace(
            report().cluster,
            trend=tuple(
                dataclasses.replace(p, jain=None, used=None, capacity=None)
                for p in report().cluster.trend[:-1]
            )
            + report().cluster.trend[-1:],
        ),
    ),
    "no teams, no trend": dataclasses.replace(
        report(teams=()),
        cluster=dataclasses.replace(report().cluster, trend=(), breakdown=GpuHoursBreakdown(**NOTHING)),
    ),
}


def outside_the_image(fig: Figure) -> list[str]:
    """Return each part of the drawn figure (axis with its tick labels and label, title, text, legend)
    that reaches past the image's edges (0.5 px slack), as matplotlib's renderer lays it out: what the PNG
    cuts off."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()  # type: ignore[attr-defined]
    width, height = fig.bbox.width, fig.bbox.height
    parts: list[tuple[str, Any]] = [(f"figure legend {i}", leg) for i, leg in enumerate(fig.legends)]
    parts += [(f"figure text {t.get_text()!r}", t) for t in fig.texts]
    for n, ax in enumerate(fig.axes):
        parts += [
            (f"axes {n} x axis", ax.xaxis),
            (f"axes {n} y axis", ax.yaxis),
            (f"axes {n} title", ax.title),
        ]
        parts += [(f"axes {n} text {t.get_text()!r}", t) for t in ax.texts]
        if ax.get_legend() is not None:
            parts.append((f"axes {n} legend", ax.get_legend()))
    out = []
    for what, artist in parts:
        b = artist.get_tightbbox(renderer) if artist.get_visible() else None
        if b is not None and (b.x0 < -0.5 or b.y0 < -0.5 or b.x1 > width + 0.5 or b.y1 > height + 0.5):
            out.append(
                f"{what}: x {b.x0:.1f}..{b.x1:.1f}, y {b.y0:.1f}..{b.y1:.1f} of {width:.0f}×{height:.0f}"
            )
    return out


@pytest.mark.parametrize("case", sorted(CHART_CASES))
@pytest.mark.parametrize("name", sorted(report_charts.FIGURES))
def test_every_label_and_legend_of_a_chart_is_inside_the_image(name: str, case: str) -> None:
    # The breakdown chart once named its missing parts in one long axis label, cut off at both edges
    # when all five were missing.
    fig = report_charts.FIGURES[name](CHART_CASES[case])
    assert outside_the_image(fig) == []


def test_the_breakdown_names_each_missing_part_in_its_legend() -> None:
    fig = report_charts.breakdown_figure(CHART_CASES["idle missing (no DCGM)"])
    (legend,) = fig.legends
    assert [t.get_text() for t in legend.get_texts()] == [
        "allocated busy: missing",
        "allocated idle: missing",
        "free while work waited",
        "free, no demand",
        "down or cordoned",
    ]
