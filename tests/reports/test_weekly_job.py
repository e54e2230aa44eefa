"""The weekly job: a cron trigger on the configured day and time in the configured timezone, coalesced,
with the misfire grace; a start within the grace after a missed send sends at once, and the job firing
again enqueues nothing (a real APScheduler 3 on the test's loop, a real store file)."""

from __future__ import annotations

import asyncio
from datetime import datetime
from pathlib import Path
from zoneinfo import ZoneInfo

from apscheduler.schedulers.asyncio import AsyncIOScheduler

from tests.reports.sample import StandIn
from watchtower.adapters.report.presenter import FairnessPresenter
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.config.fairness import FairnessConfig
from watchtower.domain.fairness.schedule import last_fire_time
from watchtower.runtime.weekly_report import FAIRNESS_JOB, schedule_fairness
from watchtower.services.fairness_send import FairnessMailer

BERLIN = ZoneInfo("Europe/Berlin")
CFG = FairnessConfig(
    send=True,
    timezone="Europe/Berlin",
    schedule_day="mon",
    schedule_time="09:00",
    platform_recipients=["lead@x.example"],
)


def at(*args: int) -> float:
    return datetime(*args, tzinfo=BERLIN).timestamp()


def test_the_last_fire_time_is_the_latest_scheduled_send_in_the_timezone() -> None:
    assert last_fire_time(CFG, at(2026, 11, 23, 9, 0)) == datetime(2026, 11, 23, 9, 0, tzinfo=BERLIN)
    assert last_fire_time(CFG, at(2026, 11, 23, 8, 59)) == datetime(2026, 11, 16, 9, 0, tzinfo=BERLIN)
    assert last_fire_time(CFG, at(2026, 11, 29, 23, 0)) == datetime(2026, 11, 23, 9, 0, tzinfo=BERLIN)
    # Across the autumn change of clocks (25 October 2026): still 09:00 on the wall clock.
    assert last_fire_time(CFG, at(2026, 10, 26, 10, 0)).utcoffset().total_seconds() == 3600


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def now(self) -> float:
        return self.t


async def runs(store: SQLiteAlertStore, now: float, results: list[int]) -> AsyncIOScheduler:
    mailer = FairnessMailer(
        source=StandIn(), presenter=FairnessPresenter(), outbox=store, clock=Clock(now), cfg=CFG
    )
    real = mailer.send_week

    async def counted(week=None):  # type: ignore[no-untyped-def]
        out = await real(week)
        results.append(out.enqueued)
        return out

    mailer.send_week = counted  # type: ignore[method-assign]
    scheduler = AsyncIOScheduler()
    schedule_fairness(scheduler, mailer, CFG, now=now)
    scheduler.start()
    return scheduler


async def wait_for(results: list[int], n: int) -> None:
    for _ in range(400):
        if len(results) >= n:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the job ran {len(results)} times, not {n}")


async def test_the_job_is_a_coalesced_cron_job_with_the_misfire_grace(tmp_path: Path) -> None:
    store = SQLiteAlertStore(tmp_path / "state.db")
    results: list[int] = []
    scheduler = await runs(store, at(2026, 11, 25, 12, 0), results)  # Wednesday: past the 1-day grace
    try:
        job = scheduler.get_job(FAIRNESS_JOB)
        assert job.coalesce is True and job.misfire_grace_time == 86400 and job.max_instances == 1
        fields = {f.name: str(f) for f in job.trigger.fields}
        assert (fields["day_of_week"], fields["hour"], fields["minute"]) == ("mon", "9", "0")
        assert str(job.trigger.timezone) == "Europe/Berlin"
        assert job.next_run_time.weekday() == 0 and job.next_run_time.hour == 9  # next Monday, not now
        await asyncio.sleep(0.3)
        assert results == []
    finally:
        scheduler.shutdown(wait=False)
        store.close()


async def test_a_start_within_the_grace_sends_at_once_and_a_second_firing_or_restart_adds_nothing(
    tmp_path: Path,
) -> None:
    db = tmp_path / "state.db"
    store = SQLiteAlertStore(db)
    results: list[int] = []
    late = at(2026, 11, 23, 15, 0)  # Monday 15:00: the 09:00 send was missed while the service was down
    scheduler = await runs(store, late, results)
    try:
        await wait_for(results, 1)
        assert results == [1]
        scheduler.get_job(FAIRNESS_JOB).modify(next_run_time=datetime.now(BERLIN))  # it fires again
        await wait_for(results, 2)
        assert results == [1, 0]
    finally:
        scheduler.shutdown(wait=False)
        store.close()
    store = SQLiteAlertStore(db)  # a restart, still within the grace
    scheduler = await runs(store, late + 600, results)
    try:
        await wait_for(results, 3)
        assert results == [1, 0, 0]
        assert [m.key for m in store.messages()] == ["fairness:2026-W47:lead@x.example"]
    finally:
        scheduler.shutdown(wait=False)
        store.close()
