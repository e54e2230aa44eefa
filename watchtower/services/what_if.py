"""The weekly report's "What if" section: the week's recorded jobs (ReplayRecords) replayed under each policy
of `replay.what_if`, off the event loop, for `FairnessReports.build`.

The replay runs where `run` puts it: the service hands in its replay worker pool (a replay is pure Python
for seconds, and in a thread it would hold the interpreter's lock against the tick), the command line a
thread (it has no tick to hold up). An ended week's section is kept once computed, so the page, the JSON and
the weekly email of one week replay it once; a week still under way is replayed again after FRESH_FOR.

Nothing here raises: no recorded jobs, a store that cannot be read or a worker that died become the
section's own words, and the report goes out with them.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import cast

from watchtower.config.model import Settings
from watchtower.domain.fairness.what_if import WhatIf, WhatIfFailure
from watchtower.ports import ReplayRecords
from watchtower.replay.what_if import NO_JOBS, what_if

from .replay_jobs import ReplayJobs

log = logging.getLogger("watchtower.fairness")

# Runs a call that takes no argument and pickles (a functools.partial of a module-level function) off the
# event loop, and gives its result.
Runner = Callable[[Callable[[], WhatIf]], Awaitable[WhatIf]]
SETTLED_AFTER = 3600.0  # an ended week's records are complete this long after its end (late facts are in)
# A week still under way is replayed again once its section is this old: its page's views do not each start
# a replay of seconds, and a view a few minutes later sees the jobs recorded since.
FRESH_FOR = 600.0
_KEPT = 8


async def in_thread(call: Callable[[], WhatIf]) -> WhatIf:
    return await asyncio.to_thread(call)


def in_pool(submit: Callable[[Callable[[], WhatIf]], Future[WhatIf]]) -> Runner:
    """Return a runner that hands each call to a process pool's `submit` and awaits its future."""

    async def run(call: Callable[[], WhatIf]) -> WhatIf:
        return await asyncio.wrap_future(submit(call))

    return run


NOT_RECORDED = "this state store records no jobs for replay: the section needs a store that does"


class WhatIfReplays:
    def __init__(self, *, settings: Settings, records: ReplayRecords | None, run: Runner = in_thread) -> None:
        self.settings = settings
        self.records = records
        self.run = run
        self._kept: dict[tuple[float, float], tuple[float, WhatIf]] = {}  # week -> (when computed, section)
        self._lock = asyncio.Lock()  # one week replayed at a time: a second build of it waits and reuses it

    @property
    def policies(self) -> list[str]:
        return [w.name for w in self.settings.replay.what_if]

    async def section(self, start: float, end: float, *, now: float) -> WhatIf | None:
        """Return the section of the week [start, end); None when no policy is configured."""
        if not self.settings.replay.what_if:
            return None
        key = (start, end)
        async with self._lock:
            if (kept := self._kept.get(key)) is not None:
                at, section = kept
                if at >= end + SETTLED_AFTER or now - at < FRESH_FOR:
                    return section
            got = await self._compute(start, end)
            if not _failed_for_now(got):
                if key not in self._kept and len(self._kept) >= _KEPT:
                    del self._kept[min(self._kept)]  # the oldest week
                self._kept[key] = (now, got)
            return got

    async def _compute(self, start: float, end: float) -> WhatIf:
        names = tuple(self.policies)
        r = self.records
        if r is None:
            return WhatIf(empty=NOT_RECORDED, policies=names)
        try:
            jobs, nodes = await asyncio.to_thread(
                lambda: (r.replay_jobs(start, end), r.replay_nodes(start, end))
            )
        # Broad: each store raises its own errors (sqlite3, psycopg); the report goes out without the section.
        except Exception as e:
            log.exception("what if: the week's recorded jobs could not be read")
            return _all_failed(names, f"the week's recorded jobs could not be read: {e}")
        if not jobs:
            return WhatIf(empty=NO_JOBS, policies=names)
        call = functools.partial(
            what_if,
            list(jobs),
            list(nodes),
            list(self.settings.tiers),
            [(w.name, w.policy) for w in self.settings.replay.what_if],
        )
        try:
            return await self.run(call)
        # Broad: a worker process that died, a pool shut down, a result that did not unpickle: said in the
        # section, and the report still goes.
        except Exception as e:
            log.exception("what if: the week's replays did not run")
            return _all_failed(names, f"the replays did not run: {type(e).__name__}: {e}")


def _all_failed(names: tuple[str, ...], why: str) -> WhatIf:
    return WhatIf(failures=tuple(WhatIfFailure(n, why) for n in names), policies=names, empty=_FAILED)


_FAILED = "the replays could not be made this time: see each policy below"


def _failed_for_now(w: WhatIf) -> bool:
    """Whether the section failed for a reason that may pass (the store, the pool): not kept, tried again."""
    return w.empty == _FAILED


def records_of(*stores: object) -> ReplayRecords | None:
    """Return the first of `stores` that records what a replay reads (ReplayRecords); None when none does."""
    for store in stores:
        if callable(getattr(store, "replay_jobs", None)) and callable(getattr(store, "replay_nodes", None)):
            return cast(ReplayRecords, store)
    return None


def what_if_replays(
    settings: Settings, records: ReplayRecords | None, pool: ReplayJobs | None
) -> WhatIfReplays | None:
    """Return the section's builder when `replay.what_if` names a policy: its replays in `pool`'s worker
    processes (the service's), else in a thread (the command line)."""
    if not settings.replay.what_if:
        return None
    run = in_pool(pool.run_off_loop) if pool is not None else in_thread
    return WhatIfReplays(settings=settings, records=records, run=run)
