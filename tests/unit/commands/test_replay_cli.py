"""`watchtower replay` through the real command line: real files in tmp_path, every format, the errors
(a wrong policy key, a missing trace column, an unknown tier, --week) and --out."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

TRACE = """\
id,team,tier,submitted,started,duration,pods,gpus_per_pod
a,nlp,low,2026-11-30T08:00:00Z,2026-11-30T08:00:00Z,2h,1,8
b,vision,low,2026-11-30T08:10:00Z,2026-11-30T10:00:00Z,1h,1,8
c,vision,high,2026-11-30T08:20:00Z,2026-11-30T11:00:00Z,30m,1,4
d,nlp,medium,2026-11-30T08:30:00Z,2026-11-30T11:00:00Z,1h,1,4
e,nlp,low,2026-11-30T08:40:00Z,2026-11-30T12:00:00Z,10m,1,0
"""
NO_PREEMPTION = "name: tiers only\nnodes: {count: 1, gpus: 8}\npreemption: {critical: never, high: never, medium: never}\n"
PREEMPTION = "nodes: {count: 1, gpus: 8}\ntermination_grace: 30s\n"  # named after its file


def replay(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "replay", *map(str, args)], capture_output=True, timeout=120
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    out = {"trace": tmp_path / "week.csv", "a": tmp_path / "a.yaml", "b": tmp_path / "preempting.yaml"}
    out["trace"].write_text(TRACE)
    out["a"].write_text(NO_PREEMPTION)
    out["b"].write_text(PREEMPTION)
    return out


def test_json_has_the_observed_run_and_each_policy_with_the_documented_figures(files):
    r = replay("--trace", files["trace"], "--policy", files["a"], "--policy", files["b"], "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    assert doc["schema_version"] == 1
    assert doc["trace"] == {"jobs": 4, "observed_jobs": 4, "skipped": {"no GPUs asked": 1}}
    assert [(x["name"], x["kind"]) for x in doc["runs"]] == [
        ("observed", "observed"),
        ("tiers only", "replayed"),
        ("preempting", "replayed"),
    ]
    for run in doc["runs"]:
        assert {"utilisation", "jain_index", "preemptions", "gpu_hours_lost", "tiers", "teams"} <= set(run)
        assert [t["tier"] for t in run["tiers"]] == ["high", "medium", "low"]  # the policy's order
        assert [t["team"] for t in run["teams"]] == ["nlp", "vision"]
        for g in run["tiers"] + run["teams"]:
            assert set(g["wait_seconds"]) == {"mean", "p50", "p95", "p99", "max"}
            assert {"jobs", "preemptions", "gpu_hours_lost", "attainment"} <= set(g)
    observed, tiers_only, preempting = doc["runs"]
    high = {x["name"]: x["tiers"][0]["wait_seconds"]["max"] for x in doc["runs"]}
    # As observed c waited 2h40m; alone on the node after a finishes (10:00) it waits 1h40m; preempting, 30 s.
    assert high == {"observed": 9600.0, "tiers only": 6000.0, "preempting": 30.0}
    assert tiers_only["preemptions"] == 0 and preempting["preemptions"] == 1
    assert preempting["gpu_hours_lost"] > 0


def test_text_is_aligned_tables_with_each_tier_s_runs_side_by_side(files):
    r = replay("--trace", files["trace"], "--policy", files["a"], "--policy", files["b"])
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().splitlines()
    assert lines[0] == "trace: 4 jobs, 4 with an observed start (skipped: 1 no GPUs asked)"
    header = next(i for i, line in enumerate(lines) if line.startswith("tier "))
    block = lines[header : header + 4]
    assert [line.split()[0] for line in block[1:]] == ["high", "tiers", "preempting"]
    assert "observed" in block[1]
    # Aligned: each figure column ends where its header does.
    end = block[0].index("jobs") + len("jobs")
    assert all(line[end - 1] != " " and line[end : end + 1] == " " for line in block[1:])


def test_csv_has_one_row_per_run_and_tier_or_team(files):
    r = replay("--trace", files["trace"], "--policy", files["a"], "--format", "csv")
    assert r.returncode == 0, r.stderr.decode()
    rows = list(csv.DictReader(io.StringIO(r.stdout.decode())))
    assert [(x["run"], x["group"], x["name"]) for x in rows] == [
        (run, group, name)
        for run in ("observed", "tiers only")
        for group, names in (("tier", ("high", "medium", "low")), ("team", ("nlp", "vision")))
        for name in names
    ]
    high = rows[0]
    assert float(high["wait_p95_seconds"]) == 9600.0 and high["jobs"] == "1"


def test_out_writes_the_file_and_prints_nothing(files, tmp_path):
    out = tmp_path / "result.json"
    r = replay("--trace", files["trace"], "--policy", files["a"], "--format", "json", "--out", out)
    assert (r.returncode, r.stdout) == (0, b""), r.stderr.decode()
    assert json.loads(out.read_text())["runs"][1]["name"] == "tiers only"


def test_a_wrong_policy_key_is_named_with_its_file_and_exit_2(files):
    files["a"].write_text("nodes: {count: 1, gpus: 8}\npreemptoin: {high: never}\nquotas: {nlp: -1}\n")
    r = replay("--trace", files["trace"], "--policy", files["a"])
    assert (r.returncode, r.stdout) == (2, b"")
    err = r.stderr.decode()
    assert err.startswith(f"{files['a']}: cannot replay, 2 problems:"), err
    assert "  preemptoin: Extra inputs are not permitted" in err
    assert "  quotas: team 'nlp': a quota cannot be negative (-1)" in err
    assert "Traceback" not in err


def test_a_policy_without_nodes_is_refused_by_name(files):
    files["a"].write_text("termination_grace: 10s\n")
    r = replay("--trace", files["trace"], "--policy", files["a"])
    assert r.returncode == 2
    assert f"{files['a']}: cannot replay, 1 problem:\n  nodes: missing" in r.stderr.decode()


def test_a_missing_trace_column_is_named(files):
    files["trace"].write_text(TRACE.replace(",gpus_per_pod", "").replace(",1,8\n", ",1\n"))
    r = replay("--trace", files["trace"], "--policy", files["a"])
    assert r.returncode == 2
    assert f"{files['trace']}: cannot replay, 1 problem:\n  line 1: missing column gpus_per_pod" in (
        r.stderr.decode()
    )


def test_an_unknown_tier_names_its_row(files):
    files["trace"].write_text(TRACE.replace("nlp,medium", "nlp,urgent"))
    r = replay("--trace", files["trace"], "--policy", files["a"])
    assert r.returncode == 2
    assert "  line 5, column tier: unknown tier 'urgent' (tiers: critical, high, medium, low)" in (
        r.stderr.decode()
    )


def test_a_json_lines_trace_gives_the_same_runs_as_its_csv(files, tmp_path):
    rows = list(csv.DictReader(io.StringIO(TRACE)))
    jsonl = tmp_path / "week.jsonl"
    jsonl.write_text("".join(json.dumps(row) + "\n" for row in rows))
    a = replay("--trace", files["trace"], "--policy", files["a"], "--format", "json")
    b = replay("--trace", jsonl, "--policy", files["a"], "--format", "json")
    assert a.returncode == b.returncode == 0, b.stderr.decode()
    assert json.loads(a.stdout) == json.loads(b.stdout)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["--week", "2026-W47"],
            "watchtower replay: no state store at",
        ),
        (["--format", "xml"], "watchtower replay: --format is one of text, json, csv, html"),
        ([], "watchtower replay: give --trace FILE"),
    ],
)
def test_bad_options_exit_2_with_one_line(files, args, message):
    extra = [] if args and args[0] == "--week" else ["--trace", files["trace"]] if args else []
    r = replay(*extra, "--policy", files["a"], *args)
    assert r.returncode == 2
    assert r.stderr.decode().startswith(message), r.stderr.decode()


def test_two_policies_of_one_name_are_refused(files):
    r = replay("--trace", files["trace"], "--policy", files["a"], "--policy", files["a"])
    assert r.returncode == 2
    assert "name: 'tiers only' is already the name of" in r.stderr.decode()


def test_html_escapes_a_hostile_team_name_and_holds_every_run_s_figures(files, tmp_path):
    hostile = '<script>alert("x")</script>'
    files["trace"].write_text(TRACE.replace("vision", f'"{hostile.replace(chr(34), chr(34) * 2)}"'))
    out = tmp_path / "page.html"
    r = replay(
        "--trace",
        files["trace"],
        "--policy",
        files["a"],
        "--policy",
        files["b"],
        "--format",
        "html",
        "--out",
        out,
    )
    assert r.returncode == 0, r.stderr.decode()
    page = out.read_text()
    assert "<script>" not in page
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page
    for run in ("observed", "tiers only", "preempting"):
        assert f"<td>{run}" in page
    # Each tier's chart, inline, and each run's high-tier max wait in the tier's table.
    assert page.count('src="data:image/png;base64,') == 3
    for wait in ("2h40m", "1h40m", "30s"):
        assert f'<td class="num">{wait}</td>' in page
    assert 'id="fidelity"' in page


def test_a_job_larger_than_any_node_is_refused_with_its_reason_and_the_rest_replayed(files):
    files["trace"].write_text(TRACE + "huge,nlp,low,2026-11-30T09:00:00Z,,1h,1,16\n")
    r = replay("--trace", files["trace"], "--policy", files["a"])
    assert r.returncode == 0, r.stderr.decode()
    text = r.stdout.decode()
    assert (
        "refused under tiers only (could never run):\n  huge: a pod asks 16 GPUs; no node has that much"
        in text
    )
