"""A delivery process the crash test starts and kills: drains the outbox argv[1] names (a SQLite file or a
PostgreSQL URL) to the webhook argv[2]."""

from __future__ import annotations

import asyncio
import sys

import httpx

from tests.alerting.helpers import SECRET, settings
from tests.fixtures.stores import open_spec
from watchtower.adapters.clock import SystemClock
from watchtower.adapters.webhook import WebhookSender
from watchtower.services.alerting import DeliveryWorker


async def main(db: str, url: str) -> None:
    store = open_spec(db)
    async with httpx.AsyncClient() as http:
        s = settings({"receivers": [{"name": "default", "webhooks": [{"url": url, "secret": SECRET}]}]})
        worker = DeliveryWorker(
            store=store,
            senders={"default/webhook/0": WebhookSender(url=url, client=http, secret=SECRET, timeout=60)},
            clock=SystemClock(),
            cfg=s.alerting,
        )
        while store.depth():
            await worker.drain()
            await asyncio.sleep(0.05)
    store.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2]))
