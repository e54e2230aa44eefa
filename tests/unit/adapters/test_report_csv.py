"""The CSV attachment: one row per team, every figure a column, missing as an empty cell, never 0."""

from __future__ import annotations

import csv
import io

from tests.reports.sample import HOSTILE_TEAM, report
from watchtower.adapters.report.csv_export import report_csv


def rows() -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(report_csv(report()), newline="")))


def test_one_row_per_team_with_its_figures() -> None:
    by = {r["team"]: r for r in rows()}
    assert set(by) == {"nlp", "vision", "'" + HOSTILE_TEAM}
    v = by["vision"]
    assert v["week"] == "2026-W47" and v["namespaces"] == "team-vision"
    assert float(v["used_gpu_hours"]) == 2016.0 and float(v["entitlement_gpu_hours"]) == 3360.0
    assert float(v["attainment"]) == 0.6 and v["entitlement_source"] == "quota"
    assert float(v["satisfaction"]) == 2016.0 / 2500.0
    assert float(v["share_gpu"]) == 0.25 and v["dominant_resource"] == "gpu"
    assert float(v["gpu_hours_lost"]) == 42.5 and float(v["idle_share"]) == 0.1
    assert v["starvation_incidents"] == "1" and v["long_running"] == "1" and v["top_waiting"] == "1"
    # Per tier, in the configured order of tiers.
    assert float(v["wait_p95_s_low"]) == 14400.0 and v["waits_censored_low"] == "2"
    assert float(v["censored_oldest_s_low"]) == 93600.0 and v["preemptions_suffered_low"] == "3"
    assert v["preemptions_caused_critical"] == "1" and v["wait_p50_s_high"] == ""


def test_a_missing_figure_is_an_empty_cell_never_zero() -> None:
    h = next(r for r in rows() if r["team"].endswith("victim@evil.example"))
    assert h["used_gpu_hours"] == "" and h["attainment"] == "" and h["idle_allocated_gpu_hours"] == ""
    assert h["share_gpu"] == "" and h["satisfaction"] == ""
    assert h["gang_stalls"] == "1" and h["waits_censored_high"] == "1"


def test_a_name_a_spreadsheet_would_run_is_quoted_as_text() -> None:
    teams = [r["team"] for r in rows()]
    assert "'" + HOSTILE_TEAM in teams  # begins with =: prefixed, so it stays text
    header = report_csv(report()).split("\r\n")[0].split(",")
    assert header[:4] == ["week", "team", "namespaces", "used_gpu_hours"]
    assert [c for c in header if c.endswith("_low")][:2] == ["waits_finished_low", "wait_p50_s_low"]
