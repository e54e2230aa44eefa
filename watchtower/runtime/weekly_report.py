"""The weekly fairness report's job on the scheduler: a cron trigger, the misfire grace and the retries; the
fleet report (`fleet.report.send`) is sent by the same job."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

from watchtower.config.fairness import FairnessConfig
from watchtower.domain.fairness.schedule import send_hour_minute, within_grace
from watchtower.ports import Fence
from watchtower.services.fairness_send import FairnessMailer
from watchtower.services.fleet_send import FleetMailer

log = logging.getLogger("watchtower")

FAIRNESS_JOB = "watchtower-fairness-report"
FAIRNESS_RETRY = 900.0  # seconds between tries of a send whose report could not be made


def schedule_fairness(
    scheduler: Any,
    mailer: FairnessMailer,
    cfg: FairnessConfig,
    *,
    now: float,
    fence: Fence | None = None,
    fleet: FleetMailer | None = None,
) -> None:
    """Add the weekly report to an APScheduler 3 scheduler: a cron job on `schedule_day`/`schedule_time` in
    `timezone`, coalesced, with `misfire_grace`. A start within the grace after a missed send runs it at
    once (an in-memory job store forgets missed runs); the send keys make every extra run enqueue nothing.
    With `fleet`, each run also sends the fleet report; either failing retries both (the keys make the one
    that succeeded enqueue nothing again)."""
    from apscheduler.triggers.cron import CronTrigger

    hh, mm = send_hour_minute(cfg)
    tz = ZoneInfo(cfg.timezone)
    trigger = CronTrigger(day_of_week=cfg.schedule_day, hour=hh, minute=mm, timezone=tz)
    late = within_grace(cfg, now)

    async def send() -> None:
        if fence is not None and fence.term() is None:
            # Every replica schedules the job; only the Lease holder sends (DESIGN §2). The sent-once keys
            # in the shared store keep a leader change around the hour from sending twice.
            log.info("the weekly fairness report is the leader's to send; this replica does not lead")
            return
        failed = False
        for what, send_week in (("", mailer.send_week), ("fleet ", fleet.send_week if fleet else None)):
            if send_week is None:
                continue
            try:
                await send_week()
            except Exception:
                # Prometheus down, the store busy...: nothing was recorded; try again while still in the grace.
                log.exception("the weekly %sfairness report could not be enqueued", what)
                failed = True
        if failed:
            due = datetime.now(tz) + timedelta(seconds=FAIRNESS_RETRY)
            if within_grace(cfg, due.timestamp()):
                scheduler.add_job(
                    send, "date", run_date=due, id=FAIRNESS_JOB + "-retry", replace_existing=True
                )

    scheduler.add_job(
        send,
        trigger,
        id=FAIRNESS_JOB,
        misfire_grace_time=int(cfg.misfire_grace),
        coalesce=True,
        max_instances=1,
        replace_existing=True,
        **({"next_run_time": datetime.now(tz)} if late else {}),
    )
