"""The weekly send as the crash test runs it in its own process: the job (enqueue 2026-W47's reports), then
delivery to the SMTP server on 127.0.0.1:argv[2] until the outbox is empty. Store file: argv[1]."""

from __future__ import annotations

import asyncio
import sys

from tests.reports.sample import StandIn
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.email import EmailSender
from watchtower.adapters.report.presenter import FairnessPresenter
from watchtower.adapters.store.sqlite import SQLiteAlertStore
from watchtower.config import Settings
from watchtower.config.fairness import FairnessConfig
from watchtower.domain.fairness.week import IsoWeek
from watchtower.services.alerting import DeliveryWorker
from watchtower.services.fairness_send import REPORT_INTEGRATION, FairnessMailer

CFG = FairnessConfig(
    send=True,
    platform_recipients=["lead@x.example", "ops@x.example"],
    team_recipients={"nlp": ["nlp@x.example"], "vision": ["vision@x.example", "cv@x.example"]},
)


async def main(db: str, port: int) -> None:
    store = SQLiteAlertStore(db)
    clock = SystemClock()
    mailer = FairnessMailer(
        source=StandIn(), presenter=FairnessPresenter(), outbox=store, clock=clock, cfg=CFG
    )
    out = await mailer.send_week(IsoWeek.parse("2026-W47"))
    print(f"enqueued {out.enqueued}", flush=True)
    sender = EmailSender(
        host="127.0.0.1",
        port=port,
        sender="watchtower@cluster.example",
        to=["x@x.example"],
        security="none",
        timeout=60,
        deadline=120,
    )
    worker = DeliveryWorker(
        store=store, senders={REPORT_INTEGRATION: sender}, clock=clock, cfg=Settings().alerting
    )
    while store.depth():
        await worker.drain()
        await asyncio.sleep(0.05)
    store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2])))
