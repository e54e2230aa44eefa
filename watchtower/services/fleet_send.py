"""Sending the weekly fleet fairness report: once per ISO week per recipient, through the same outbox.

Each address of `fleet.report.recipients` gets one email a week, keyed `fleet:<week>:<address>` (apart
from the cluster report's `fairness:` keys, so one address may get both). As for the cluster report, the
key is recorded with the outbox row: the job firing twice or a restart enqueues nothing new, and delivery
is the outbox's. The report is built only when some address still lacks it, so a repeated run does not
ask every cluster and the engine again.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence

from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.domain.fairness.fleet import FleetReport
from watchtower.domain.fairness.mail import Attachment, ReportMail
from watchtower.domain.fairness.week import IsoWeek
from watchtower.ports import Clock, ReportOutbox
from watchtower.services.fairness_send import REPORT_INTEGRATION, SendOutcome, last_complete_week
from watchtower.services.fleet_render import render_fleet

log = logging.getLogger(__name__)

FleetSource = Callable[[IsoWeek], Awaitable[FleetReport]]


def fleet_send_key(week: str, address: str) -> str:
    """Return the idempotency key of one week's fleet report to one address: `fleet:<week>:<address>`."""
    return f"fleet:{week}:{address.lower()}"


class FleetMailer:
    """Enqueues a week's fleet report email to each configured address not yet sent it."""

    def __init__(
        self,
        *,
        source: FleetSource,
        outbox: ReportOutbox,
        clock: Clock,
        timezone: str,
        recipients: Sequence[str],
        on_enqueued: Callable[[], None] | None = None,
    ) -> None:
        self.source, self.outbox, self.clock = source, outbox, clock
        self.timezone, self.recipients, self.on_enqueued = timezone, tuple(recipients), on_enqueued

    async def send_week(self, week: IsoWeek | None = None) -> SendOutcome:
        """Enqueue the fleet report of `week` (default: the last complete one) to every address not yet
        sent it. A dead cluster or engine is named missing in the report; whatever else the source raises
        propagates, nothing recorded, and the next run tries again."""
        now = self.clock.now()
        week = week or last_complete_week(now, self.timezone)
        w = str(week)
        unique = list(dict.fromkeys(a.lower() for a in self.recipients))
        keys = {a: fleet_send_key(w, a) for a in unique}
        done = await asyncio.to_thread(self.outbox.recorded, keys.values())
        todo = [a for a in unique if keys[a] not in done]
        n = 0
        if todo:
            report = await self.source(week)
            text, page = render_fleet(report, "text"), render_fleet(report, "html")
            table = render_fleet(report, "csv").encode()
            messages = [
                OutboxMessage(
                    id=0,
                    key=keys[a],
                    integration=REPORT_INTEGRATION,
                    group_key=f"fleet:{w}",
                    payload=ReportMail(
                        subject=f"Fleet fairness report {w}",
                        to=(a,),
                        text=text,
                        html=page,
                        images=(),
                        attachments=(Attachment(f"fleet-fairness-{w}.csv", "text/csv", table),),
                        message_id_key=keys[a],
                    ).to_payload(),
                    created=now,
                    next_attempt=now,
                )
                for a in todo
            ]
            n = await asyncio.to_thread(self.outbox.enqueue_once, messages, now)
        if n:
            log.info("fleet fairness report %s: %d email(s) enqueued", w, n)
            if self.on_enqueued is not None:
                self.on_enqueued()
        return SendOutcome(week=w, enqueued=n, already_sent=len(unique) - n, recipients=tuple(unique))
