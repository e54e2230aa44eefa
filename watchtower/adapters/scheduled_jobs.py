"""The service's timed jobs (the tick, the store's pruning, the weekly report) on APScheduler 3, stopped
without a traceback in the log.

`AsyncIOScheduler.shutdown` cancels every job still under way, and APScheduler logs each cancellation as a
failed job with a `CancelledError` traceback: on SIGTERM during a tick the operator reads "Error running job"
although nothing failed. Worse, a job submitted in the same turn of the loop as the shutdown has not even
started, so no code of the job can catch its cancellation. `ScheduledJobs.add_job` wraps each job so that a
cancellation during the stop ends it quietly, and `stop` first lets every submitted job take its first step,
where it sees the stop and returns without doing any work.

A job still running when its next run is due skips that run (one instance at a time, coalesced), and
APScheduler warns once per skipped run: a tick that overruns a 0.5 s interval writes two lines a second. Here
the first skip of a job is logged at once, then at most one line a minute with the count.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import logging
import time
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

SKIPS_EVERY = 60.0  # seconds between two lines about the same job's skipped runs
_SKIP_TEXT = 'Execution of job "%s" skipped: maximum number of running'


class _SkipNotices(logging.Filter):
    """Drops APScheduler's own line per skipped run; `ScheduledJobs` counts the skips instead."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(_SKIP_TEXT)


class ScheduledJobs:
    """An AsyncIOScheduler whose jobs end quietly when it stops; `add_job` takes APScheduler's arguments.

    A plain function runs in a worker thread (as APScheduler's asyncio executor would run it), so a job that
    touches the store does not hold the loop."""

    def __init__(self) -> None:
        from apscheduler.schedulers.asyncio import AsyncIOScheduler

        self.scheduler = AsyncIOScheduler()
        self.stopping = False
        self._skips: dict[str, tuple[float, int]] = {}  # job id -> (when last said, skips since)
        self._filter = _SkipNotices()

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
        from apscheduler.events import EVENT_JOB_MAX_INSTANCES

        self.scheduler.add_listener(self._skipped, EVENT_JOB_MAX_INSTANCES)
        logging.getLogger("apscheduler.scheduler").addFilter(self._filter)
        self.scheduler.start()

    def _skipped(self, event: Any) -> None:
        now = time.monotonic()
        said, count = self._skips.get(event.job_id, (None, 0))
        count += 1
        if said is None or now - said >= SKIPS_EVERY:
            job = self.scheduler.get_job(event.job_id)
            name = job.name if job is not None else event.job_id
            since = "" if said is None else f" in the last {now - said:.0f} s"
            log.warning(
                "%s: %d scheduled run%s skipped%s: the previous run was still going (each skip is folded"
                " into the next run)",
                name,
                count,
                "" if count == 1 else "s",
                since,
            )
            self._skips[event.job_id] = (now, 0)
        else:
            self._skips[event.job_id] = (said, count)

    async def stop(self) -> None:
        """Start no job any more, then cancel those under way (each ends quietly)."""
        self.stopping = True
        self.scheduler.pause()
        # A job handed to the loop in this turn has a task whose first step is still queued; one turn lets it
        # run that step and return. Only then may shutdown cancel what is left.
        await asyncio.sleep(0)
        self.scheduler.shutdown(wait=False)
        await asyncio.sleep(0)  # the cancelled jobs take their cancellation and end
        logging.getLogger("apscheduler.scheduler").removeFilter(self._filter)
