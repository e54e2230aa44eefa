"""The service's timed jobs (the tick, the store's pruning, the weekly report) on APScheduler 3, stopped
without a traceback in the log.

`AsyncIOScheduler.shutdown` cancels every job still under way, and APScheduler logs each cancellation as a
failed job with a `CancelledError` traceback: on SIGTERM during a tick the operator reads "Error running job"
although nothing failed. Worse, a job submitted in the same turn of the loop as the shutdown has not even
started, so no code of the job can catch its cancellation. `ScheduledJobs.add_job` wraps each job so that a
cancellation during the stop ends it quietly, and `stop` first lets every submitted job take its first step,
where it sees the stop and returns without doing any work.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class ScheduledJobs:
    """An AsyncIOScheduler whose jobs end quietly when it stops; `add_job` takes APScheduler's arguments.

    A plain function runs in a worker thread (as APScheduler's asyncio executor would run it), so a job that
    touches the store does not hold the loop."""

    def __init__(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self.scheduler = AsyncIOScheduler()
        self.stopping = False

    def add_job(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return self.scheduler.add_job(self._quiet(func), *args, **kwargs)

    def _quiet(self, func: Callable[..., Any]) -> Callable[..., Any]:
        is_async = inspect.iscoroutinefunction(func)

        # wraps keeps the job's name (APScheduler names a job by its function) for its own log lines.
        @functools.wraps(func)
        async def run(*args: Any, **kwargs: Any) -> None:
            if self.stopping:
                return
            try:
                if is_async:
                    await func(*args, **kwargs)
                else:
                    await asyncio.to_thread(func, *args, **kwargs)
            except asyncio.CancelledError:
                if not self.stopping:
                    raise
                log.debug("%s cut short by the shutdown", getattr(func, "__qualname__", func))

        return run

    def start(self) -> None:
        self.scheduler.start()

    async def stop(self) -> None:
        """Start no job any more, then cancel those under way (each ends quietly)."""
        self.stopping = True
        self.scheduler.pause()
        # A job handed to the loop in this turn has a task whose first step is still queued; one turn lets it
        # run that step and return. Only then may shutdown cancel what is left.
        await asyncio.sleep(0)
        self.scheduler.shutdown(wait=False)
        await asyncio.sleep(0)  # the cancelled jobs take their cancellation and end
