"""The Fairness dashboard: the panels the weekly report's readers look for, reading recording rules that the
shipped rule file defines, and the configuration's idle threshold."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from alerts import generate as alerts_generate
from dashboards import generate
from watchtower.config import settings_from_mapping

ROOT = Path(__file__).parents[2]
BOARD = ROOT / "dashboards" / "generated" / "watchtower-fairness.json"


def _panels(board: dict) -> dict[str, dict]:
    return {p["title"]: p for p in board["panels"] if p["type"] != "row"}


def test_the_fairness_dashboard_shows_share_jain_idle_share_and_waits_per_team_and_tier() -> None:
    titles = set(_panels(json.loads(BOARD.read_text())))
    assert {
        "GPUs used per team against entitlement",
        "GPU-hours per team over the dashboard's range, against entitlement",
        "Attainment per team (used / entitled)",
        "Jain's index over the teams with demand",
        "Idle share of allocated GPUs (under 10 %)",
        "Longest current wait per team and tier",
        "Waiting GPUs per team and tier",
    } <= titles


def test_every_recording_rule_the_dashboard_reads_is_in_the_shipped_rule_file() -> None:
    rules = yaml.safe_load((ROOT / "alerts" / alerts_generate.RULES).read_text())
    recorded = {r["record"] for g in rules["groups"] for r in g["rules"] if "record" in r}
    exprs = [t["expr"] for p in _panels(json.loads(BOARD.read_text())).values() for t in p["targets"]]
    read = {w.split("{")[0] for e in exprs for w in e.replace("(", " ").split() if w.count(":") == 2}
    assert read and read <= recorded


def test_the_idle_panel_follows_the_configured_threshold() -> None:
    settings = settings_from_mapping(
        {"prometheus": {"url": "http://127.0.0.1:9090", "idle_threshold": 25}}, env={}
    )
    _, text = generate.render(generate.load(ROOT / "dashboards" / "fairness.dashboard.py"), settings)
    assert "Idle share of allocated GPUs (under 25 %)" in _panels(json.loads(text))
