"""The demo's simulated past week, recorded beside the live demo: in a process of its own (its own core and
interpreter), watched by a worker thread, its metrics backfilled into the demo's Prometheus as blocks, and
the week's report built ahead once it is recorded (past_week.record_past_week does the recording)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchtower.config.model import Settings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Backfill:
    """The demo's Prometheus and its scrape targets, for the past week's samples."""

    prom: Any  # LocalPrometheus
    workdir: Path
    exporter: str
    watchtower: str


def _record_and_backfill(
    settings: Settings,
    week: Any,
    stop: Any,
    backfill: Backfill | None,
    span: float | None,
    on_settled: Callable[[float], object] | None = None,
) -> tuple[Any, str]:
    """Record the past week (in a worker thread, the recording in a process of its own); with `backfill`, write its samples into the demo's Prometheus
    as blocks and restart it so they are loaded now. Return what was recorded and a note on the metrics."""
    from watchtower.adapters.prometheus.backfill import PromtoolMissing, find_promtool
    from watchtower.commands.demo.past_week import MetricsTargets

    if backfill is None:
        recorded = _in_own_process(settings, week, stop, span, None)
        return recorded, "no Prometheus: its GPU-hours are shown as missing"
    try:
        promtool = find_promtool()
    except PromtoolMissing as e:
        log.warning("the past week's metrics are not backfilled: %s", e)
        return _in_own_process(settings, week, stop, span, None), f"metrics not backfilled ({e})"
    targets = MetricsTargets(
        workdir=backfill.workdir,
        into=backfill.prom.data_dir,
        promtool=promtool,
        exporter=backfill.exporter,
        watchtower=backfill.watchtower,
        step=settings.fairness.step,
    )
    done = _in_own_process(settings, week, stop, span, targets, on_settled)
    if not done.completed or done.blocks is None:
        return done, ""
    t0 = time.perf_counter()
    backfill.prom.restart()
    return done, (
        f"{done.blocks.samples} samples backfilled into Prometheus (promtool on {done.blocks.files} files, "
        f"{done.blocks.waited:.1f} s after the last; restart {time.perf_counter() - t0:.1f} s)"
    )


def _past_week_process(
    settings: Settings, week: Any, stop: Any, span: Any, metrics: Any, results: Any
) -> None:
    """The past week's process: record it and put ("ok", PastWeek) or ("error", words) on `results`,
    with ("settled", t) before them each time more of its metrics are blocks."""
    from watchtower.commands.demo.past_week import record_past_week

    def settled(t: float) -> None:
        results.put(("settled", t))

    try:
        results.put(
            ("ok", record_past_week(settings, week, stop, span=span, metrics=metrics, on_settled=settled))
        )
    except BaseException as e:  # reported to the demo, which logs it
        results.put(("error", f"{type(e).__name__}: {e}"))


def _in_own_process(
    settings: Settings,
    week: Any,
    stop: Any,
    span: float | None,
    metrics: Any,
    on_settled: Callable[[float], object] | None = None,
) -> Any:
    """Run record_past_week in a process of its own (blocking; a worker thread calls it): its own core and
    interpreter, so neither it nor the live demo waits for the other's GIL. `stop` is a multiprocessing
    Event of the spawn context; `on_settled` is called (in this thread) with each ("settled", t) it sends.
    Raises RuntimeError when the process fails or dies."""
    import multiprocessing
    import queue

    ctx = multiprocessing.get_context("spawn")  # not fork: the demo's threads and loop are not inherited
    results = ctx.Queue()
    proc = ctx.Process(
        target=_past_week_process,
        args=(settings, week, stop, span, metrics, results),
        name="watchtower-past-week",
        daemon=True,
    )
    proc.start()
    try:
        while True:
            try:
                status, value = results.get(timeout=0.5)
                if status != "settled":
                    break
                if on_settled is not None:
                    on_settled(value)
            except queue.Empty:
                if not proc.is_alive():
                    raise RuntimeError(
                        f"the past week's process exited with status {proc.exitcode}"
                    ) from None
        proc.join(30)
    finally:
        if proc.is_alive():  # only ours, by its pid
            proc.terminate()
            proc.join(10)
    if status != "ok":
        raise RuntimeError(value)
    return value


def past_week_in_background(
    settings: Settings,
    week: Any,
    echo: Callable[[str], object],
    backfill: Backfill | None = None,
    *,
    span: float | None = None,
    warm: Callable[[], Awaitable[None]] | None = None,
    keep: Callable[[float], Awaitable[None]] | None = None,
    on_recorded: Callable[[Any], Awaitable[None]] | None = None,
) -> Callable[[], Any]:
    """Start recording the simulated past week (and backfilling its metrics) in a process of its own,
    watched by a worker thread; return what stops it and waits for it (so the store is closed only after
    its last write). While it records, `keep(t)` is awaited, one at a time, each time its metrics up to
    `t` are blocks (only the latest `t` when several came meanwhile); once it is recorded, the `keep`
    under way ends and `warm()` is awaited, and `on_recorded(PastWeek)` beside it."""
    import multiprocessing

    loop = asyncio.get_running_loop()
    settled: asyncio.Queue[float | None] = asyncio.Queue()  # None: recorded, keep no more

    def on_settled(t: float) -> None:  # in the worker thread
        loop.call_soon_threadsafe(settled.put_nowait, t)

    async def keep_up() -> None:
        assert keep is not None
        while True:
            got = [await settled.get()]
            while not settled.empty():
                got.append(settled.get_nowait())
            if None in got:
                return
            t = max(x for x in got if x is not None)
            try:
                await keep(t)
            except Exception as e:  # the report asks again what was not kept
                log.info("the past week's answers up to %s were not kept ahead: %s", t, e)

    keeper = asyncio.create_task(keep_up()) if keep is not None else None
    stop = multiprocessing.get_context("spawn").Event()
    task = asyncio.create_task(
        asyncio.to_thread(
            _record_and_backfill, settings, week, stop, backfill, span, on_settled if keeper else None
        )
    )

    def done(t: asyncio.Task[Any]) -> None:
        settled.put_nowait(None)
        if t.cancelled():
            return
        if (e := t.exception()) is not None:
            log.error("the simulated past week %s could not be recorded: %s", week, e)
            return
        recorded, note = t.result()
        if recorded.completed:
            echo(f"  past week       {week} recorded ({recorded.ticks} ticks), {note}")
            warming.append(asyncio.create_task(ready()))
            if on_recorded is not None:
                warming.append(asyncio.create_task(recorded_hook(recorded)))

    async def recorded_hook(recorded: Any) -> None:
        assert on_recorded is not None
        try:
            await on_recorded(recorded)
        except Exception as e:  # the demo goes on without it
            log.warning("the past week %s: %s", week, e)

    async def ready() -> None:
        t0 = time.perf_counter()
        how = "built ahead in {:.0f} s"
        try:
            if keeper is not None:
                await keeper
            if warm is not None:
                await warm()
        except Exception as e:  # the page will say what is wrong; the demo goes on
            log.warning("the fairness report of %s could not be built ahead: %s", week, e)
            how = "not built ahead after {:.0f} s (see the log); the page builds it when opened"
        echo(
            f"  past week       {week}: its fairness report is ready ({how.format(time.perf_counter() - t0)})"
        )

    warming: list[asyncio.Task[None]] = []
    task.add_done_callback(done)

    async def stop_it() -> None:
        stop.set()
        with contextlib.suppress(Exception):
            await task
        for w in [*warming, *([keeper] if keeper is not None else [])]:
            w.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await w

    return stop_it
