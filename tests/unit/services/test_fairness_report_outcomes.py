"""The weekly fairness report gives each team the preemptions it suffered for nothing: the history records
what each preemption came to (migration 5), and the report counts, per victim team and tier, those whose
preemptor did not start where the victims were, with the GPU-hours they threw away."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from tests.unit.services.test_fairness_report import WEEK, E, H, S, pre, reports
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.api.fairness.json_view import report_dict


async def test_each_team_gets_the_preemptions_it_suffered_for_nothing(tmp_path: Path) -> None:
    h = SQLiteFairnessHistory(tmp_path / "watchtower.db")
    h.record(
        preemptions=[
            # alpha: Job/train's gang preempted once (two pods, one preemption) and it did not help...
            replace(
                pre("p1", S + 30 * H, "alpha", "Job/train", 8.0, "beta", "high"),
                outcome="did_not_help",
                outcome_reason="started_elsewhere",
            ),
            replace(
                pre("p2", S + 30 * H + 10, "alpha", "Job/train", 8.0, "beta", "high"),
                outcome="did_not_help",
                outcome_reason="started_elsewhere",
            ),
            # ... Job/etl's helped, Job/sweep's was never judged (no preemptor named).
            replace(pre("p3", S + 40 * H, "alpha", "Job/etl", 3.0, "beta", "high"), outcome="helped"),
            pre("p4", S + 50 * H, "alpha", "Job/sweep", 1.0, "", "unknown"),
            # beta: one that still waited.
            replace(
                pre("p5", S + 60 * H, "beta", "Job/x", 2.5, "alpha", "critical"),
                outcome="did_not_help",
                outcome_reason="still_waiting",
            ),
        ]
    )
    r = await reports(h, None).build(WEEK, now=E + 3600)
    a, b = r.team("alpha"), r.team("beta")
    assert a is not None and b is not None
    assert dict(a.preemptions_suffered) == {"low": 3}
    assert dict(a.preemptions_for_nothing) == {"low": 1}
    assert a.gpu_hours_lost == pytest.approx(20.0) and a.gpu_hours_lost_for_nothing == pytest.approx(16.0)
    assert dict(b.preemptions_for_nothing) == {"low": 1} and b.gpu_hours_lost_for_nothing == pytest.approx(
        2.5
    )
    teams = {t["team"]: t for t in report_dict(r)["teams"]}
    assert teams["alpha"]["preemptions_for_nothing"] == {"low": 1}
    assert teams["alpha"]["gpu_hours_lost_for_nothing"] == pytest.approx(16.0)
    h.close()
