"""`watchtower report fairness` as a user runs it: a subprocess reading the configured store (a real SQLite
history) and printing JSON or CSV; bad weeks, teams, formats and stores end with a clear line and exit 2."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.domain.fairness.history import PreemptionRecord, WaitEpisode

S = datetime(2026, 11, 16, tzinfo=UTC).timestamp()  # Monday of 2026-W47


def report(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "report", "fairness", *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def config(tmp_path: Path) -> Path:
    db = tmp_path / "state.db"
    h = SQLiteFairnessHistory(db)
    h.record(
        [
            WaitEpisode(
                "wait:a", "pod", "nlp", "language", "high", "Job/a", 4, S + 3600, S + 7200, "scheduled"
            ),
            WaitEpisode("wait:b", "kueue", "vision", "vision", "low", "Job/b", 8, S + 3600, None, "waiting"),
        ],
        [
            PreemptionRecord(
                "preempt:u1",
                S + 100,
                "vision",
                "vision",
                "low",
                "Job/b",
                "nlp",
                "language",
                "high",
                "Pod/p",
                4,
                2.0,
            )
        ],
        heartbeats=[S + 60 * m for m in range(3 * 24 * 60)],
    )
    h.close()
    cfg = tmp_path / "watchtower.yaml"
    cfg.write_text(f"store:\n  path: {db}\nfairness:\n  timezone: UTC\n")
    return cfg


def test_json_for_a_week(config: Path, tmp_path: Path) -> None:
    r = report("--week", "2026-W47", "--config", str(config))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["week"] == "2026-W47" and doc["start"] == "2026-11-16T00:00:00Z"
    teams = {t["team"]: t for t in doc["teams"]}
    assert teams["language"]["waits"][0]["p50_seconds"] == 3600
    assert teams["vision"]["waits"][0]["censored"] == 1
    assert teams["vision"]["preemptions_suffered"] == {"low": 1} and teams["vision"]["gpu_hours_lost"] == 2.0
    assert teams["language"]["preemptions_caused"] == {"high": 1}
    history = next(c for c in doc["coverage"] if c["source"] == "watchtower history")
    assert (history["hours_present"], history["hours_expected"]) == (72, 168) and doc["partial"] is True


def test_csv_for_one_team_to_a_file(config: Path, tmp_path: Path) -> None:
    out = tmp_path / "w47.csv"
    r = report(
        "--week",
        "2026-W47",
        "--team",
        "vision",
        "--format",
        "csv",
        "--out",
        str(out),
        "--config",
        str(config),
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == ""
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    assert [(row["team"], row["waits_censored_low"], row["preemptions_suffered_low"]) for row in rows] == [
        ("vision", "1", "1")
    ]
    assert rows[0]["used_gpu_hours"] == ""  # no Prometheus: missing, not 0


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--week", "2026-47"], "--week: not an ISO week (expected YYYY-Www, e.g. 2026-W47): '2026-47'"),
        (["--week", "2021-W53"], "2021 has no ISO week 53"),
        (
            ["--week", "2026-W47", "--team", "nobody"],
            "no team 'nobody' in this report (teams: language, vision)",
        ),
        (["--format", "pdf"], "--format is one of csv, html, json, text"),
    ],
)
def test_bad_input_is_one_clear_line_and_exit_2(config: Path, args: list[str], words: str) -> None:
    r = report(*args, "--config", str(config))
    assert r.returncode == 2, r.stdout
    assert words in r.stderr
    assert "Traceback" not in r.stderr and r.stdout == ""


def test_no_store_says_where_it_looked(tmp_path: Path) -> None:
    cfg = tmp_path / "watchtower.yaml"
    cfg.write_text(f"store:\n  path: {tmp_path / 'missing.db'}\n")
    r = report("--config", str(cfg))
    assert r.returncode == 2
    assert f"no state store at {tmp_path / 'missing.db'}" in r.stderr
    assert not (tmp_path / "missing.db").exists()  # looking made no empty database
