"""The report's charts as PNG bytes, drawn with matplotlib's Agg backend: each a pure function of the report.

No pyplot and no global figure state: each chart is its own Figure on its own Agg canvas, so charts may be
drawn from several threads. Same report, same matplotlib: same bytes (fixed size, dpi, bundled DejaVu Sans,
no timestamp in the PNG). A missing figure is drawn as no bar with the word "missing", never as 0.
"""

from __future__ import annotations

import io
import statistics
from collections.abc import Callable, Sequence

from matplotlib.artist import Artist
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from watchtower.domain.fairness.report import FairnessReport

WIDTH_IN, DPI = 6.4, 100  # 640 px wide
FONT = {"family": "DejaVu Sans", "size": 9}
MAX_TEAMS = 30  # a chart of 200 bars is unreadable: the teams that used most, the rest named by count
BUSY, IDLE, ENTITLED, MISSING_COLOUR = "#2f7d32", "#c77700", "#5f6b76", "#9b1c1c"


def _label(text: str, limit: int = 24) -> str:
    # `$` starts mathtext and an unbalanced one raises: a team name is always plain text.
    flat = " ".join(text.split()).replace("\\", "\\\\").replace("$", r"\$")
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _figure(height_px: int) -> Figure:
    fig = Figure(figsize=(WIDTH_IN, height_px / DPI), dpi=DPI)
    FigureCanvasAgg(fig)
    return fig


def _png(fig: Figure) -> bytes:
    buf = io.BytesIO()
    # metadata: no Software/version line, so the bytes depend on the report alone.
    fig.savefig(buf, format="png", dpi=DPI, metadata={"Software": None})
    return buf.getvalue()


def _style(ax: object) -> None:
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)  # type: ignore[attr-defined]
    ax.tick_params(labelsize=FONT["size"])  # type: ignore[attr-defined]


def _teams(report: FairnessReport) -> tuple[list[str], int]:
    ranked = sorted(report.teams, key=lambda t: (-(t.used or 0.0), t.team))
    shown = [t.team for t in ranked[:MAX_TEAMS]]
    return shown, len(ranked) - len(shown)


def shares_height(report: FairnessReport) -> int:
    return 90 + 22 * max(1, min(MAX_TEAMS, len(report.teams)))


def shares_figure(report: FairnessReport) -> Figure:
    """Return GPU-hours used against entitlement, one pair of bars per team (the 30 that used most)."""
    names, more = _teams(report)
    fig = _figure(shares_height(report))
    ax = fig.add_subplot()
    _style(ax)
    by = {t.team: t for t in report.teams}
    ys = list(range(len(names)))
    top = 0.0
    labelled: set[str] = set()

    def once(label: str) -> str | None:
        # One legend entry per series, whichever team first has the figure.
        if label in labelled:
            return None
        labelled.add(label)
        return label

    for y, n in zip(ys, names, strict=True):
        t = by[n]
        if t.entitlement is not None:
            ax.barh(y + 0.2, t.entitlement, height=0.38, color=ENTITLED, label=once("entitlement E"))
            top = max(top, t.entitlement)
        if t.used is not None:
            ax.barh(y - 0.2, t.used, height=0.38, color=BUSY, label=once("used U"))
            top = max(top, t.used)
    for y, n in zip(ys, names, strict=True):
        t = by[n]
        if t.used is None or t.entitlement is None:
            ax.text(0, y, " missing", va="center", color=MISSING_COLOUR, fontdict=FONT)
    ax.set_yticks(ys, [_label(n) for n in names], fontdict=FONT)
    ax.invert_yaxis()
    ax.set_xlim(0, top * 1.08 if top > 0 else 1)
    ax.set_xlabel("GPU-hours" + (f" (and {more} more teams, not shown)" if more else ""), fontdict=FONT)
    ax.set_title(f"Used against entitlement, {report.week}", fontdict={**FONT, "size": 11})
    if labelled:
        ax.legend(loc="lower right", fontsize=FONT["size"], frameon=False)
    fig.tight_layout()
    return fig


def _tiers(report: FairnessReport) -> list[str]:
    order = list(report.method.critical_after)
    seen = {w.tier for t in report.teams for w in t.waits}
    return [t for t in order if t in seen] + sorted(seen - set(order))


WAITS_HEIGHT = 300


def waits_figure(report: FairnessReport) -> Figure:
    """Return wait p95 per tier: the worst team's and the median over teams (hours); missing tiers marked."""
    tiers = _tiers(report)
    fig = _figure(WAITS_HEIGHT)
    ax = fig.add_subplot()
    _style(ax)
    xs = list(range(len(tiers)))
    single = len(report.teams) == 1
    for x, tier in zip(xs, tiers, strict=True):
        p95 = [w.p95 for t in report.teams for w in t.waits if w.tier == tier and w.p95 is not None]
        if not p95:
            ax.text(x, 0, "missing", ha="center", va="bottom", color=MISSING_COLOUR, fontdict=FONT)
            continue
        worst = max(p95) / 3600
        if single:
            ax.bar(x, worst, width=0.6, color=IDLE, label="p95" if x == 0 else None)
        else:
            ax.bar(x - 0.17, worst, width=0.34, color=IDLE, label="worst team's p95")
            ax.bar(
                x + 0.17, statistics.median(p95) / 3600, width=0.34, color=ENTITLED, label="median team's p95"
            )
    ax.set_xticks(xs, [_label(t, 14) for t in tiers], fontdict=FONT)
    ax.set_ylabel("hours", fontdict=FONT)
    ax.set_title(f"Wait p95 per tier, {report.week}", fontdict={**FONT, "size": 11})
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        uniq = dict(zip(labels, handles, strict=True))
        ax.legend(uniq.values(), uniq.keys(), fontsize=FONT["size"], frameon=False)
    if not tiers:
        ax.text(0.5, 0.5, "no waits this week", ha="center", transform=ax.transAxes, fontdict=FONT)
        ax.set_xticks([])
    fig.tight_layout()
    return fig


BREAKDOWN_HEIGHT = 220


def breakdown_figure(report: FairnessReport) -> Figure:
    """Return the cluster's GPU-hours as one stacked bar: busy, idle, planned, free, unavailable. A missing
    part is a legend entry like the others (a hollow box, "<part>: missing" in red), in the legend's band
    inside the image, not a long axis label that the width cuts off when several parts are missing."""
    b = report.cluster.breakdown
    parts: Sequence[tuple[str, float | None, str]] = (
        ("allocated busy", b.allocated_busy, BUSY),
        ("allocated idle", b.allocated_idle, IDLE),
        ("free while work waited", b.planned, "#1565c0"),
        ("free, no demand", b.free_idle, "#b8c4cf"),
        ("down or cordoned", b.unavailable, "#424242"),
    )
    fig = _figure(BREAKDOWN_HEIGHT)
    ax = fig.add_subplot()
    _style(ax)
    left = 0.0
    entries: list[Artist] = []
    for name, v, colour in parts:
        if v is None:
            entries.append(
                Patch(facecolor="none", edgecolor=MISSING_COLOUR, hatch="///", label=f"{name}: missing")
            )
            continue
        if v <= 0:
            continue
        ax.barh(0, v, left=left, height=0.5, color=colour)
        entries.append(Patch(facecolor=colour, label=name))
        left += v
    ax.set_yticks([])
    ax.set_xlim(0, max(left, b.capacity or 0.0) * 1.02 or 1)
    if b.capacity is not None:
        ax.axvline(b.capacity, color="#1d232a", linewidth=1)
    if left <= 0 and b.capacity is None:
        # Nothing to scale: no axis of made-up numbers, the word instead.
        ax.set_xticks([])
        ax.text(
            0.5,
            0.5,
            "missing",
            ha="center",
            va="center",
            transform=ax.transAxes,
            color=MISSING_COLOUR,
            fontdict=FONT,
        )
    ax.set_xlabel("GPU-hours", fontdict=FONT)
    ax.set_title(f"Where the GPU-hours went, {report.week}", fontdict={**FONT, "size": 11})
    # The legend below the bar, in a band of its own that the layout leaves free.
    fig.tight_layout(rect=(0, 0.28, 1, 1))
    if entries:
        legend = fig.legend(
            handles=entries,
            labels=[str(h.get_label()) for h in entries],
            loc="lower center",
            ncol=3,
            fontsize=8,
            frameon=False,
        )
        for entry, text in zip(entries, legend.get_texts(), strict=True):
            if str(entry.get_label()).endswith(": missing"):
                text.set_color(MISSING_COLOUR)
    return fig


TREND_HEIGHT = 260


def trend_figure(report: FairnessReport) -> Figure:
    """Return the 8-week trend: Jain's index (left axis) and GPU-hours used against capacity (right)."""
    pts = report.cluster.trend
    fig = _figure(TREND_HEIGHT)
    ax = fig.add_subplot()
    _style(ax)
    xs = list(range(len(pts)))
    jx = [x for x, p in zip(xs, pts, strict=True) if p.jain is not None]
    ax.plot(jx, [p.jain for p in pts if p.jain is not None], marker="o", color=BUSY, label="Jain's index")
    for x, p in zip(xs, pts, strict=True):
        if p.jain is None:
            ax.text(x, 0.02, "missing", ha="center", color=MISSING_COLOUR, fontdict={**FONT, "size": 7})
    ax.set_ylim(0, 1.05)
    # Fixed: autoscaled to the weeks with data alone, one known week put the others' "missing" far
    # outside and left no room for the right axis.
    ax.set_xlim(-0.5, max(len(pts), 1) - 0.5)
    ax.set_ylabel("Jain's index", fontdict=FONT)
    ax.set_xticks(xs, [p.week for p in pts], fontdict={**FONT, "size": 7})
    ax2 = ax.twinx()
    ux = [x for x, p in zip(xs, pts, strict=True) if p.used is not None]
    ax2.bar(
        ux,
        [p.used for p in pts if p.used is not None],
        width=0.5,
        color=ENTITLED,
        alpha=0.35,
        label="GPU-hours used",
    )
    cx = [x for x, p in zip(xs, pts, strict=True) if p.capacity is not None]
    ax2.plot(
        cx,
        [p.capacity for p in pts if p.capacity is not None],
        linestyle="--",
        marker="_",  # a week alone draws no line: its capacity still shows
        markersize=16,
        color="#1d232a",
        linewidth=1,
        label="capacity",
    )
    ax2.set_ylabel("GPU-hours", fontdict=FONT)
    ax2.tick_params(labelsize=FONT["size"])
    ax2.set_ylim(bottom=0)
    ax.set_title("Trend, last 8 weeks", fontdict={**FONT, "size": 11})
    h1, l1 = ax.get_legend_handles_labels()
    h2, l2 = ax2.get_legend_handles_labels()
    if h1 or h2:
        # Below the axes: inside, it covered the "missing" marks and low weeks' points.
        fig.legend(h1 + h2, l1 + l2, loc="lower center", ncol=3, fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.08, 1, 1))
    else:
        fig.tight_layout()
    return fig


FIGURES: dict[str, Callable[[FairnessReport], Figure]] = {
    "shares": shares_figure,
    "waits": waits_figure,
    "breakdown": breakdown_figure,
    "trend": trend_figure,
}


def shares_chart(report: FairnessReport) -> bytes:
    return _png(shares_figure(report))


def waits_chart(report: FairnessReport) -> bytes:
    return _png(waits_figure(report))


def breakdown_chart(report: FairnessReport) -> bytes:
    return _png(breakdown_figure(report))


def trend_chart(report: FairnessReport) -> bytes:
    return _png(trend_figure(report))


CHARTS: dict[str, Callable[[FairnessReport], bytes]] = {
    "shares": shares_chart,
    "waits": waits_chart,
    "breakdown": breakdown_chart,
    "trend": trend_chart,
}


def chart_heights(report: FairnessReport) -> dict[str, int]:
    """Return each chart's height in pixels (the HTML reserves the space before the image loads)."""
    return {
        "shares": shares_height(report),
        "waits": WAITS_HEIGHT,
        "breakdown": BREAKDOWN_HEIGHT,
        "trend": TREND_HEIGHT,
    }


REPLAY_WAITS = ("mean", "p50", "p95", "p99", "max")
REPLAY_HEIGHT = 260
RUN_COLOURS = (ENTITLED, IDLE, BUSY, "#1f5f9f", "#7b3f9e", "#8c6d1f")


def replay_waits_chart(tier: str, runs: Sequence[tuple[str, dict[str, float | None]]]) -> bytes:
    """Return one tier's waits in a replay (hours): mean and percentiles along the axis, the runs' bars
    beside each other (`runs`: each run's name and its `wait_seconds`); a missing figure is marked."""
    fig = _figure(REPLAY_HEIGHT)
    ax = fig.add_subplot()
    _style(ax)
    n = max(1, len(runs))
    width = 0.8 / n
    xs = list(range(len(REPLAY_WAITS)))
    for k, (name, waits) in enumerate(runs):
        colour = RUN_COLOURS[k % len(RUN_COLOURS)]
        for x, figure in zip(xs, REPLAY_WAITS, strict=True):
            at = x - 0.4 + width * (k + 0.5)
            value = waits.get(figure)
            if value is None:
                ax.text(at, 0, "missing", ha="center", va="bottom", color=MISSING_COLOUR, fontsize=7)
                continue
            ax.bar(at, value / 3600, width=width * 0.95, color=colour, label=_label(name) if x == 0 else None)
    ax.set_xticks(xs, list(REPLAY_WAITS), fontdict=FONT)
    ax.set_ylabel("hours", fontdict=FONT)
    ax.set_title(f"Waits of tier {_label(tier, 40)}", fontdict={**FONT, "size": 11})
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=FONT["size"], frameon=False)
    fig.tight_layout()
    return _png(fig)


def chart(report: FairnessReport, name: str) -> bytes:
    """Return one chart's PNG; raise KeyError for a name that is no chart."""
    return CHARTS[name](report)
