"""The jobs only the leader runs (alert grouping, notification delivery), each started again after a
failure."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from watchtower.api.container import Container
from watchtower.services.alerting import DeliveryWorker

log = logging.getLogger("watchtower")

Job = Callable[[], Coroutine[Any, Any, None]]
DELIVERY = "notification delivery"
STORE_RETRY_PAUSE = 5.0  # seconds before delivery starts again after its store failed


def leader_jobs(container: Container, worker: DeliveryWorker | None) -> list[tuple[str, Job]]:
    """Return, by name, the jobs only the leader runs: started when this replica starts leading, cancelled
    the moment it stops. The alert evaluation and the push into Alertmanager run in the tick, which asks
    the same fence (`TickLoop.tick`); the weekly report's job asks it too (`schedule_fairness`). The
    fairness recorder is no leader job: every replica records (idempotent upserts)."""
    alerting = container.alerting
    if alerting is None or worker is None:
        return []
    notifier, clock = alerting.notifier, container.clock
    # A store that went away for a while (PostgreSQL restarting) must not stop grouping or delivery until
    # the next restart: each starts again after a pause.
    return [
        ("alert grouping", lambda: again_after_failure(lambda: notifier.run(clock), "alert grouping")),
        (DELIVERY, lambda: again_after_failure(worker.run, DELIVERY)),
    ]


async def again_after_failure(
    run: Callable[[], Awaitable[None]], name: str, *, pause: float = STORE_RETRY_PAUSE
) -> None:
    """Run `run` until it returns, starting it again `pause` seconds after each failure: a database that
    went away for a while must not stop delivery until the next restart."""
    while True:
        try:
            await run()
            return
        except Exception as e:
            log.error("%s failed (%s); starting it again in %g s", name, e, pause)
            await asyncio.sleep(pause)
