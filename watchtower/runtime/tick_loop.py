"""The evaluation tick: the one place that says in which order a tick's consumers see it."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from datetime import UTC, datetime
from typing import Any

from watchtower.adapters.clock import SystemClock
from watchtower.api.container import Container
from watchtower.domain.tick import Tick
from watchtower.services.gpu_usage import GpuUsageService

log = logging.getLogger("watchtower")

TickConsumer = Callable[[Tick], Awaitable[None]]

# How long a tick waits for a Prometheus read before going on with the last figures.
GPU_READ_WAIT = 1.0


class TickLoop:
    """One tick, in the one order its consumers see it: GPU usage reads Prometheus (beside the tick, see
    `_refresh_gpu`) and names the idle holders, the queue tracker evaluates (with those holders' statuses), GPU usage weighs idle GPUs against the
    queue, alerting reads the Tick with GPU findings, and the API's documents are built from the same Tick.

    A consumer that fails is logged and counted; the others still get the Tick.
    """

    def __init__(self, container: Container, *, extra: Sequence[TickConsumer] = ()) -> None:
        self.c = container
        self.extra = tuple(extra)
        # Prometheus stamps samples with the wall clock, whatever clock the cluster runs on (a simulator's
        # runs faster), so GPU figures are read as of wall-clock now.
        self.wall = SystemClock()
        self._ticking = asyncio.Lock()  # a kick and the scheduled tick must not hand out Ticks at once
        self._loop: asyncio.AbstractEventLoop | None = None
        self.stopped = False  # shutting down: no kicks any more
        self._gpu_refresh: asyncio.Task[bool] | None = None  # the Prometheus read under way, if any

    async def tick(self) -> Tick:
        c = self.c
        async with self._ticking:
            gpu = c.gpu
            if gpu is not None:
                await self._refresh_gpu(gpu)
            now = c.clock.now()
            tick = c.queue_tracker.evaluate(now, holders_of=gpu.idle_holders() if gpu is not None else ())
            c.queue_tracker.prune(now)
            if gpu is not None:
                snap = tick.snapshot_with_holders()
                if await self._step("GpuUsageService.on_snapshot", gpu.on_snapshot(snap, self.wall.now())):
                    tick = tick.with_gpu(tuple(gpu.alerts()))
            if c.alerting is not None:
                # Only the leader evaluates and hands on notifications; a follower lists what it stored.
                if c.leadership.term() is not None:
                    await self._step("Alerting.on_tick", c.alerting.on_tick(tick))
                else:
                    await self._step("Alerting.follow", c.alerting.follow())
            await self._step("DocumentCache.prebuild", c.documents.prebuild(tick))
            for consumer in self.extra:
                name = getattr(consumer, "__qualname__", type(consumer).__name__)
                await self._step(name, consumer(tick))
            return tick

    async def _refresh_gpu(self, gpu: GpuUsageService) -> None:
        """Read Prometheus beside the tick: the tick waits `GPU_READ_WAIT` at most, so a prompt answer is in
        this tick, and otherwise goes on with the last view (stale once a read fails or times out; the read
        goes on and the next tick has it). A Prometheus answering in 20 s held every tick for the whole read
        (timeout × attempts: 30 s and more by default) while nothing else was evaluated."""
        if self._gpu_refresh is not None and not self._gpu_refresh.done():
            return  # an earlier tick's read, still under way: not waited for again
        now = self.wall.now()
        if not gpu.due(now):
            return
        read = self._gpu_refresh = asyncio.create_task(
            self._step("GpuUsageService.refresh", gpu.refresh(now))
        )
        # Started before its first await, the read has marked itself: on_snapshot then sees it not due.
        await asyncio.wait({read}, timeout=GPU_READ_WAIT)

    async def _step(self, name: str, work: Awaitable[object]) -> bool:
        try:
            await work
        except Exception:
            log.exception("tick consumer %s failed", name)
            self.c.queue_tracker.metrics.consumer_failed(name)
            return False
        return True

    async def _run(self) -> None:
        """One tick as a job of its own (scheduled or kicked): cut short on the way out, quietly."""
        try:
            await self.tick()
        except asyncio.CancelledError:
            if not self.stopped:
                raise

    def schedule(self, scheduler: Any) -> None:
        """Add the evaluation tick to an APScheduler 3 scheduler that runs on the current event loop."""
        self._loop = asyncio.get_running_loop()
        scheduler.add_job(
            self._run,
            "interval",
            seconds=self.c.settings.queue.evaluate_every,
            id="watchtower-evaluate",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )

    def kick(self) -> None:
        """Tick now rather than at the next interval (from any thread): the first full picture is there."""
        loop = self._loop
        if loop is None or loop.is_closed() or self.stopped:
            return
        loop.call_soon_threadsafe(lambda: loop.create_task(self._run()))
