"""The weekly report's start-estimate lines: the week's checked estimates in a real SQLite store, the report
built by the service every door uses, and its text, HTML and JSON (issue 33)."""

from __future__ import annotations

import json
import zoneinfo
from pathlib import Path

from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.api.schemas.fairness import FairnessReport as FairnessReportSchema
from watchtower.commands.report import render_report
from watchtower.config.model import Settings
from watchtower.domain.estimate_accuracy import GivenEstimate
from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.fairness_report import FairnessReports

MIN = 60.0
WEEK = IsoWeek(2027, 2)


def checked(tier: str, i: int, start: float, actual: float) -> GivenEstimate:
    """A wait of the week whose first estimate said 10 min and which started `actual` seconds after it."""
    at = start + 3600 * (i + 1)
    return GivenEstimate(
        f"wait:ml/Pod/{tier}-{i}@{at:.0f}",
        "ml",
        f"Pod/{tier}-{i}",
        tier,
        at,
        at,
        at + 10 * MIN,
        at + actual,
        "started",
    )


async def test_the_report_has_one_line_per_tier_with_n_the_share_within_and_the_median(
    tmp_path: Path,
) -> None:
    settings = Settings()
    start, end = WEEK.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
    h = SQLiteFairnessHistory(tmp_path / "state.db")
    # high: 10 estimates; 8 started at 10 min (error 0), 2 at 40 min (-30/40 = -0.75, outside).
    #   |errors| ascending: 0 x8, 0.75 x2 → median 0; within 8 of 10: 80 %.
    # low: 4 estimates, started at 5, 10, 15, 20 min: errors +5/5 = 1, 0, -5/15 = -1/3, -10/20 = -1/2
    #   → within 3 of 4 (75 %), |errors| 0, 1/3, 1/2, 1 → median (1/3 + 1/2) / 2 = 5/12 (42 %); too few: poor.
    rows = [checked("high", i, start, 10 * MIN if i < 8 else 40 * MIN) for i in range(10)]
    rows += [checked("low", i, start, m * MIN) for i, m in enumerate((5, 10, 15, 20))]
    rows.append(checked("low", 99, start - 7 * 86400, 5 * MIN))  # the week before: not this week's
    h.record_estimates(rows)
    reports = FairnessReports(settings=settings, history=h, metrics=None, estimates=h)
    r = await reports.build(WEEK, now=end + 3600)
    assert [(a.tier, a.n, a.within) for a in r.estimates] == [("high", 10, 8), ("low", 4, 3)]
    text = render_report(r, "text")
    assert "START ESTIMATES" in text
    assert "  high: 10 estimates checked, 80 % within ±50 %, median error 0 %\n" in text
    assert "  low: 4 estimates checked, 75 % within ±50 %, median error 42 % (poor)\n" in text
    page = render_report(r, "html")
    part = page[page.index('<section id="estimates">') : page.index('<section id="method">')]
    assert (
        '<td>high</td><td class="num">10</td><td class="num">80.0 %</td><td class="num">0.0 %</td><td>fair</td>'
        in part
    )
    assert "<td>low</td>" in part and "<td>poor</td>" in part
    whole = json.loads(render_report(r, "json"))
    FairnessReportSchema.model_validate(whole)  # the API's declared model, unknown keys refused
    assert whole["estimates"][1] == {
        "tier": "low",
        "checked": 4,
        "within": 3,
        "share_within": 0.75,
        "median_error": 0.4167,
        "verdict": "poor",
    }
    h.close()
