"""The weekly report's "What if" through the report service: `FairnessReports.build` over a real SQLite
history, the week's jobs read from ReplayRecords and replayed under `replay.what_if`.

ReplayRecords is a tiny in-memory implementation here (`Records`): the stores' own recording is another
part, tested against both databases there; this one hands over the two-job week of
tests/unit/replay/test_what_if.py, inside 2026-W47, and counts how often it is read.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest

from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.config import settings_from_mapping
from watchtower.config.model import Settings
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.fairness.what_if import WhatIf
from watchtower.replay.policy import NodeSpec
from watchtower.replay.trace import TraceJob
from watchtower.replay.what_if import NO_JOBS
from watchtower.services.fairness_report import FairnessReports
from watchtower.services.replay_jobs import ReplayJobs
from watchtower.services.what_if import NOT_RECORDED, WhatIfReplays, in_pool

S = datetime(2026, 11, 16, tzinfo=UTC).timestamp()  # Monday of 2026-W47
E = S + 7 * 86400
WEEK = IsoWeek(2026, 47)
LATER = E + 86400  # the week has ended and settled
POLICIES = {"replay": {"what_if": [{"name": "no preemption", "policy": {"preemption": {"high": "never"}}}]}}


class Records:
    """ReplayRecords in memory: the week's jobs and nodes, a count of the reads, a failure on demand."""

    def __init__(self, jobs: Sequence[TraceJob] = (), nodes: Sequence[NodeSpec] = ()) -> None:
        self.jobs, self.nodes = list(jobs), list(nodes)
        self.reads: list[tuple[float, float]] = []
        self.fail: Exception | None = None

    def replay_jobs(self, start: float, end: float) -> Sequence[TraceJob]:
        self.reads.append((start, end))
        if self.fail is not None:
            raise self.fail
        return [j for j in self.jobs if start <= j.submitted < end]

    def replay_nodes(self, start: float, end: float) -> Sequence[NodeSpec]:
        return self.nodes


def week_jobs() -> Records:
    return Records(
        [
            TraceJob("a", "nlp", "low", 0, S, 100.0, 1, 2, started=S),
            TraceJob("b", "vision", "high", 900_000, S + 10, 50.0, 1, 2, started=S + 100),
        ],
        [NodeSpec(name="gpu-1", gpus=2)],
    )


def reports(tmp_path: Path, settings: Settings, records: Records, **kw: object) -> FairnessReports:
    what_if = WhatIfReplays(settings=settings, records=records, **kw) if settings.replay.what_if else None  # type: ignore[arg-type]
    return FairnessReports(
        settings=settings,
        history=SQLiteFairnessHistory(tmp_path / "watchtower.db"),
        metrics=None,
        what_if=what_if,
    )


async def test_no_policy_configured_no_section(tmp_path: Path) -> None:
    records = week_jobs()
    report = await reports(tmp_path, Settings(), records).build(WEEK, now=LATER)
    assert report.what_if is None and records.reads == []


async def test_the_weeks_recorded_jobs_are_replayed_under_each_policy_off_the_event_loop(
    tmp_path: Path,
) -> None:
    settings = settings_from_mapping(POLICIES, env={})
    records = week_jobs()
    loop_thread = threading.get_ident()
    ran_in: list[int] = []

    async def run(call: Callable[[], WhatIf]) -> WhatIf:
        def where() -> WhatIf:
            ran_in.append(threading.get_ident())
            return call()

        return await asyncio.to_thread(where)

    r = reports(tmp_path, settings, records, run=run)
    report = await r.build(WEEK, now=LATER)
    w = report.what_if
    assert w is not None and w.policies == ("no preemption",)
    assert [x.name for x in w.runs] == ["observed", "as configured", "no preemption"]
    high = next(t for t in w.tiers if t.tier == "high")
    assert [(f.run, f.p50) for f in high.runs] == [
        ("observed", 90.0),
        ("as configured", 30.0),
        ("no preemption", 90.0),
    ]
    assert records.reads == [(S, E)]
    assert ran_in and loop_thread not in ran_in
    # The page and the email of an ended week replay it once.
    again = await r.build(WEEK, now=LATER + 60)
    assert again.what_if == w and records.reads == [(S, E)]


async def test_a_week_under_way_is_replayed_again_once_its_section_is_ten_minutes_old(tmp_path: Path) -> None:
    settings = settings_from_mapping(POLICIES, env={})
    records = week_jobs()
    r = reports(tmp_path, settings, records)
    during = E - 3600  # the week's last hour
    await r.build(WEEK, now=during)
    await r.build(WEEK, now=during + 300)
    assert len(records.reads) == 1
    records.jobs.append(TraceJob("c", "nlp", "low", 0, during + 400, 60.0, 1, 1))
    report = await r.build(WEEK, now=during + 601)
    assert len(records.reads) == 2
    assert report.what_if is not None and report.what_if.runs[1].jobs == 3  # the new job is replayed too


async def test_a_teams_report_has_its_own_teams_lines_only(tmp_path: Path) -> None:
    settings = settings_from_mapping(POLICIES, env={})
    r = reports(tmp_path, settings, week_jobs())
    whole = await r.build(WEEK, now=LATER)
    assert whole.what_if is not None and [t.team for t in whole.what_if.teams] == ["nlp", "vision"]
    narrowed = whole.for_teams(["vision"])
    assert narrowed.what_if is not None
    assert [t.team for t in narrowed.what_if.teams] == ["vision"]
    assert narrowed.what_if.tiers == whole.what_if.tiers  # the cluster's, as the report's cluster part is


async def test_a_week_without_recorded_jobs_says_so_and_a_store_without_records_too(tmp_path: Path) -> None:
    settings = settings_from_mapping(POLICIES, env={})
    report = await reports(tmp_path, settings, Records()).build(WEEK, now=LATER)
    assert report.what_if is not None and report.what_if.empty == NO_JOBS
    no_store = WhatIfReplays(settings=settings, records=None)
    w = await no_store.section(S, E, now=LATER)
    assert w is not None and w.empty == NOT_RECORDED


async def test_a_store_that_cannot_be_read_is_said_per_policy_the_report_still_built_and_asked_again(
    tmp_path: Path,
) -> None:
    settings = settings_from_mapping(POLICIES, env={})
    records = week_jobs()
    records.fail = OSError("database is locked")
    r = reports(tmp_path, settings, records)
    report = await r.build(WEEK, now=LATER)
    assert report.week == "2026-W47" and report.what_if is not None
    assert [(f.policy, f.why) for f in report.what_if.failures] == [
        ("no preemption", "the week's recorded jobs could not be read: database is locked")
    ]
    records.fail = None  # the store is back: the next build replays the week
    report = await r.build(WEEK, now=LATER + 60)
    assert report.what_if is not None and report.what_if.failures == () and len(records.reads) == 2


@pytest.mark.timeout(120)
async def test_the_service_replays_in_its_replay_worker_processes(tmp_path: Path) -> None:
    settings = settings_from_mapping(POLICIES, env={})
    pool = ReplayJobs(settings.replay)
    try:
        r = reports(tmp_path, settings, week_jobs(), run=in_pool(pool.run_off_loop))
        report = await r.build(WEEK, now=LATER)
    finally:
        pool.close()
    assert report.what_if is not None and report.what_if.failures == ()
    assert [x.name for x in report.what_if.runs] == ["observed", "as configured", "no preemption"]
