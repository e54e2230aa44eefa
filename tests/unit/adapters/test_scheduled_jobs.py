"""Stopping the service's scheduler logs no traceback, whatever its jobs were doing: SIGTERM during a tick
used to print APScheduler's "Error running job" with a CancelledError, which reads as a failure on call.

Each case first shows that a bare AsyncIOScheduler does log the error in that situation, so the test fails
if APScheduler's behaviour (or ours) changes under it."""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from datetime import UTC, datetime

import pytest
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from watchtower.adapters.scheduled_jobs import ScheduledJobs


def _errors(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]


async def _bare_stop(s: AsyncIOScheduler) -> None:
    s.shutdown(wait=False)
    await asyncio.sleep(0)


async def _cut_mid_job(scheduler: AsyncIOScheduler | ScheduledJobs) -> tuple[bool, bool]:
    """A job that is running (waiting, like a tick on Prometheus) when the scheduler stops; return
    (started, finished normally)."""
    started, finished = asyncio.Event(), False

    async def tick() -> None:
        nonlocal finished
        started.set()
        await asyncio.sleep(3600)
        finished = True

    scheduler.add_job(tick, "interval", seconds=60, next_run_time=datetime.now(UTC))
    scheduler.start()
    await asyncio.wait_for(started.wait(), 5)
    if isinstance(scheduler, ScheduledJobs):
        await scheduler.stop()
    else:
        await _bare_stop(scheduler)
    await asyncio.sleep(0.05)
    return started.is_set(), finished


async def _cut_before_first_step(scheduler: AsyncIOScheduler | ScheduledJobs) -> int:
    """A job handed to the loop in the very turn the stop comes: its task has not run a line. Return how
    many times its body ran."""
    ran = 0

    async def tick() -> None:
        nonlocal ran
        ran += 1

    scheduler.add_job(tick, "interval", seconds=60, next_run_time=datetime.now(UTC))
    bare = scheduler if isinstance(scheduler, AsyncIOScheduler) else scheduler.scheduler
    bare.start(paused=True)
    # The stop's first step is queued before the scheduler's pass that hands the job to the loop: the pass
    # runs in the same turn, right after the stop began (SIGTERM just before the tick's timer fired).
    stop = asyncio.ensure_future(
        scheduler.stop() if isinstance(scheduler, ScheduledJobs) else _bare_stop(scheduler)
    )
    bare.resume()
    await stop
    await asyncio.sleep(0.05)
    return ran


async def test_a_job_cut_short_mid_run_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert await _cut_mid_job(AsyncIOScheduler()) == (True, False)
    assert any(
        "CancelledError" in (r.exc_text or "") or r.exc_info
        for r in caplog.records
        if r.levelno >= logging.ERROR
    )
    caplog.clear()

    assert await _cut_mid_job(ScheduledJobs()) == (True, False)
    assert _errors(caplog) == []


async def test_a_job_not_yet_started_is_not_run_and_logs_nothing(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    assert await _cut_before_first_step(AsyncIOScheduler()) == 0
    assert any("Error running job" in m for m in _errors(caplog)), "APScheduler changed: revisit the module"
    caplog.clear()

    assert await _cut_before_first_step(ScheduledJobs()) == 0
    assert _errors(caplog) == []


async def test_a_plain_function_runs_in_a_worker_thread() -> None:
    jobs = ScheduledJobs()
    seen: list[str] = []
    done = asyncio.Event()
    loop = asyncio.get_running_loop()

    def prune() -> None:
        seen.append(threading.current_thread().name)
        loop.call_soon_threadsafe(done.set)

    jobs.add_job(prune, "interval", seconds=60, next_run_time=datetime.now(UTC))
    jobs.start()
    await asyncio.wait_for(done.wait(), 5)
    await jobs.stop()
    assert seen and seen[0] != threading.main_thread().name


async def test_a_job_failing_while_running_is_still_logged(caplog: pytest.LogCaptureFixture) -> None:
    """Quiet is only for the stop: a job's own error (or a cancellation not from the stop) stays loud."""
    caplog.set_level(logging.INFO)
    jobs = ScheduledJobs()
    failed = asyncio.Event()

    async def broken() -> None:
        failed.set()
        raise RuntimeError("the store is locked")

    jobs.add_job(broken, "interval", seconds=60, next_run_time=datetime.now(UTC))
    jobs.start()
    await asyncio.wait_for(failed.wait(), 5)
    await asyncio.sleep(0.05)
    await jobs.stop()
    assert any("the store is locked" in (r.exc_text or str(r.exc_info)) for r in caplog.records)


async def test_skipped_runs_of_an_overrunning_job_are_one_line_then_a_count(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A tick longer than its interval skips runs; APScheduler's line per skip (two a second at 0.5 s) would
    bury the log, so the first skip is said at once and the rest counted, one line per SKIPS_EVERY."""
    from watchtower.adapters import scheduled_jobs

    monkeypatch.setattr(scheduled_jobs, "SKIPS_EVERY", 0.6)
    caplog.set_level(logging.INFO)
    jobs = ScheduledJobs()
    runs = 0

    async def slow_tick() -> None:
        nonlocal runs
        runs += 1
        await asyncio.sleep(1.0)

    jobs.add_job(slow_tick, "interval", seconds=0.05, next_run_time=datetime.now(UTC), max_instances=1)
    jobs.start()
    await asyncio.sleep(0.9)
    await jobs.stop()
    ours = [
        r.getMessage()
        for r in caplog.records
        if r.name == scheduled_jobs.__name__ and "skipped" in r.getMessage()
    ]
    theirs = [
        r
        for r in caplog.records
        if r.name.startswith("apscheduler") and "maximum number of running" in r.getMessage()
    ]
    assert runs == 1
    assert theirs == []
    assert len(ours) == 2, ours  # the first skip at once, then one summary after 0.6 s
    assert re.search(r"slow_tick: 1 scheduled run skipped: the previous run was still going", ours[0])
    m = re.search(r"slow_tick: (\d+) scheduled runs skipped in the last \d+ s", ours[1])
    assert m is not None, ours[1]
    assert 3 <= int(m.group(1)) <= 18, ours[1]  # ~0.6 s of 0.05 s intervals, on a noisy machine
