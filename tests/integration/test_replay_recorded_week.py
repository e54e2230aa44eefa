"""A recorded week replayed: the service's recorders run over the demo's simulated cluster for a few simulated
hours of its past week (as `watchtower demo` records it), then `watchtower replay --export WEEK` writes one
row per GPU workload with the simulator's own arrival and start, and `watchtower replay --week WEEK` replays
it under a policy that names no nodes (the recorded inventory stands in).

Real parts: the simulator, the queue tracker, both recorders, the SQLite store, the command line in a child
process. The simulator's own figures are read from a second run of the same seed, stepped as the recording
stepped it (the cluster is deterministic for a seed)."""

from __future__ import annotations

import csv
import io
import json
import subprocess
import sys
import threading
from datetime import UTC
from pathlib import Path

import pytest

from watchtower.commands.demo.past_week import past_week_of, record_past_week
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config import settings_from_mapping
from watchtower.simulator.cluster import DEFAULT_START

SPAN = 3 * 3600.0
TICK = 120.0  # the recording's tick (past_week.STEP): a start is read from the objects, within a tick


def _simulated(settings, start: float) -> dict[tuple[str, str], dict[str, float | None]]:  # type: ignore[no-untyped-def]
    """Each GPU workload the simulated cluster created in the span, by namespace and name (the service
    names some by the object it reads: a TrainJob, a Kueue Workload), that had an object in the API (a
    bare pod a quota refused never existed), with its creation and the first time every pod was bound."""
    cfg = settings.simulator
    sim = demo_cluster(cfg.model_copy(update={"seed": cfg.seed + 1, "metrics_port": 0}), start=start)
    out: dict[tuple[str, str], dict[str, float | None]] = {}
    while sim.now() < start + SPAN:
        sim.step(10.0)
        for w in sim.workloads:
            spec = w.spec
            if not (start <= w.created < start + SPAN) or not any(t.gpus for t in spec.pods):
                continue
            kind, name = spec.kind, spec.name
            if kind == "ReplicaSet":  # a Deployment's ReplicaSet: the workload is the Deployment
                kind, name = "Deployment", name.rsplit("-", 1)[0]
            pods = [p for p in w.slots.values() if p is not None]
            if not pods and kind == "Pod":
                continue
            d = out.setdefault((spec.namespace, name), {"created": w.created, "started": None})
            if d["started"] is None and w.slots and all(p is not None and p.node for p in w.slots.values()):
                d["started"] = max(p.start_time or sim.now() for p in pods)
    return out


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict]:  # type: ignore[type-arg]
    tmp = tmp_path_factory.mktemp("recorded")
    config = tmp / "watchtower.yaml"
    config.write_text(f"store:\n  path: {tmp / 'state.db'}\n")
    settings = settings_from_mapping({"store": {"path": str(tmp / "state.db")}}, env={})
    week = past_week_of(settings, DEFAULT_START)
    done = record_past_week(settings, week, threading.Event(), span=SPAN)
    assert done.completed
    start, _ = week.bounds(UTC)
    return config, str(week), _simulated(settings, start)


def cli(*args: str | Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        [sys.executable, "-m", "watchtower.cli", "replay", *map(str, args)], capture_output=True, timeout=300
    )


def test_the_export_has_one_row_per_gpu_workload_with_the_simulators_arrival_and_start(recorded) -> None:  # type: ignore[no-untyped-def]
    config, week, truth = recorded
    r = cli("--export", week, "--config", config)
    assert r.returncode == 0, r.stderr.decode()
    rows = list(csv.DictReader(io.StringIO(r.stdout.decode())))
    ids = [row["id"].split("@")[0].split("/", 2) for row in rows]
    by_workload = {(ns, name): row for (ns, _, name), row in zip(ids, rows, strict=True)}
    assert len(by_workload) == len(rows)  # one row per workload
    assert all(int(row["gpus_per_pod"]) > 0 for row in rows)
    started = {k: d for k, d in truth.items() if d["started"] is not None}
    assert len(started) > 30
    # Every workload the simulator started is there, arriving when the simulator created it.
    assert started.keys() <= by_workload.keys()
    for k, d in started.items():
        row = by_workload[k]
        assert float(row["submitted"]) == pytest.approx(d["created"], abs=1.0), k
        assert row["started"], k
        # Read from the pods' own times: the simulator's start, or earlier when a pod of the workload ran
        # (and was preempted) before all of them did; never later than the tick after it.
        assert float(row["started"]) <= d["started"] + TICK, k
    single = [k for k in started if by_workload[k]["pods"] == "1"]
    assert len(single) > 10
    close = [k for k in single if abs(float(by_workload[k]["started"]) - started[k]["started"]) <= TICK]
    assert len(close) >= 0.9 * len(single), [(k, by_workload[k]["started"], started[k]) for k in single]


def test_the_recorded_week_replays_under_a_policy_naming_no_nodes(recorded, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    config, week, _ = recorded
    policy = tmp_path / "as-is.yaml"
    policy.write_text("name: as configured\n")
    r = cli("--week", week, "--policy", policy, "--config", config, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    doc = json.loads(r.stdout)
    observed, replayed = doc["runs"]
    assert (observed["kind"], replayed["kind"], replayed["name"]) == ("observed", "replayed", "as configured")
    assert doc["trace"]["observed_jobs"] > 30  # the recorded starts make the observed run
    assert sum(t["jobs"] for t in replayed["tiers"]) == doc["trace"]["jobs"]


def test_a_week_with_nothing_recorded_says_so(recorded) -> None:  # type: ignore[no-untyped-def]
    config, _, _ = recorded
    r = cli("--export", "2020-W10", "--config", config)
    assert r.returncode == 2
    assert "nothing recorded in 2020-W10" in r.stderr.decode()


def test_a_policy_that_moves_a_tier_gives_the_same_waits_in_replay_week_and_in_the_reports_what_if(
    recorded, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # The two once read a recorded week apart: `--week` kept each job's recorded priority, so raising a tier
    # changed nothing there while the weekly report's What if showed its effect.
    import yaml

    from watchtower.bootstrap import replay_records
    from watchtower.config import load_settings
    from watchtower.domain.fairness.week import IsoWeek
    from watchtower.replay.what_if import what_if

    config, week, _ = recorded
    settings = load_settings(config)
    tiers = [t.model_dump() for t in settings.tiers]
    low = next(t for t in tiers if t["name"] == "low")
    low["min_priority"] = max(t["min_priority"] for t in tiers) + 1_000_000  # low now ranks above critical
    policy = {"name": "low first", "tiers": sorted(tiers, key=lambda t: -t["min_priority"])}
    f = tmp_path / "low-first.yaml"
    f.write_text(yaml.safe_dump(policy))
    r = cli("--week", week, "--policy", f, "--config", config, "--format", "json")
    assert r.returncode == 0, r.stderr.decode()
    replayed = json.loads(r.stdout)["runs"][-1]
    start, end = IsoWeek.parse(week).bounds(UTC)
    with replay_records(settings) as records:
        jobs, nodes = list(records.replay_jobs(start, end)), list(records.replay_nodes(start, end))
    section = what_if(jobs, nodes, settings.tiers, [("low first", {"tiers": policy["tiers"]})])
    assert not section.failures, section.failures
    from_report = {
        t.tier: (f.p50, f.p95) for t in section.tiers for f in t.runs if f.run == "low first" and f.jobs
    }
    from_cli = {
        t["tier"]: (t["wait_seconds"]["p50"], t["wait_seconds"]["p95"])
        for t in replayed["tiers"]
        if t["jobs"]
    }
    assert from_report and from_cli.keys() == from_report.keys()
    for tier, (p50, p95) in from_report.items():
        assert from_cli[tier] == (pytest.approx(p50, abs=0.5), pytest.approx(p95, abs=0.5)), tier
