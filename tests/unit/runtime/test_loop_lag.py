"""The event loop's lag: a step that holds the loop shows as lag on `/metrics`; a free loop shows little; the
serve loop runs the monitor and stops it on the way out."""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time

import httpx
import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families

from tests.fixtures.scenario import ManualClock, ReplaySource, demo_cluster
from watchtower.adapters.metrics.registry import WatchtowerMetrics
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.domain.promql.names import EVENT_LOOP_LAG, EVENT_LOOP_LAGS
from watchtower.runtime.loop_lag import LoopLagMonitor
from watchtower.runtime.serve import serve
from watchtower.runtime.sockets import bind

MONITOR = "the event-loop lag monitor"  # the serve loop's name for the monitor's task


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Return every sample of a /metrics text by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in text_string_to_metric_families(text)
        for s in f.samples
    }


async def hold_the_loop(seconds: float) -> None:
    """A coroutine that blocks the event loop, as a slow rule or a blocking call does."""
    time.sleep(seconds)


async def test_a_coroutine_holding_the_loop_300_ms_shows_as_at_least_250_ms_of_lag_on_the_gauge() -> None:
    metrics = WatchtowerMetrics(registry=CollectorRegistry())
    measured = asyncio.Event()

    def record(lag: float) -> None:
        metrics.loop_lagged(lag)
        measured.set()

    monitor = LoopLagMonitor(record, every=0.02)
    task = asyncio.create_task(monitor.run())
    try:
        await asyncio.wait_for(measured.wait(), 5)  # it runs, and its next timer is due within 20 ms
        measured.clear()
        await hold_the_loop(0.3)
        await asyncio.wait_for(measured.wait(), 5)  # the timer due during the hold, run after it
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    got = samples(metrics.render().decode())
    assert got[(EVENT_LOOP_LAG, ())] >= 0.25
    assert monitor.worst >= 0.25
    # The histogram keeps the stall whenever the gauge is scraped: one measurement over 250 ms.
    count = got[(f"{EVENT_LOOP_LAGS}_count", ())]
    assert count - got[(f"{EVENT_LOOP_LAGS}_bucket", (("le", "0.25"),))] == 1


async def test_a_free_loop_shows_lags_far_below_a_stall() -> None:
    lags: list[float] = []
    monitor = LoopLagMonitor(lags.append, every=0.02)
    task = asyncio.create_task(monitor.run())
    try:
        async with asyncio.timeout(10):
            while len(lags) < 20:
                await asyncio.sleep(0.02)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
    assert all(lag >= 0 for lag in lags)
    # Bounds relative to the interval and to the stall above, not to this machine's speed: a typical
    # wake-up is late by less than the interval itself, and none looks like the 300 ms hold.
    assert statistics.median(lags) < monitor.every
    assert max(lags) < 0.25
    assert monitor.latest == lags[-1] and monitor.worst == max(lags)


def test_the_monitor_refuses_an_interval_that_would_spin_the_loop() -> None:
    with pytest.raises(ValueError, match="positive"):
        LoopLagMonitor(lambda lag: None, every=0)


async def test_the_running_service_exports_the_loop_lag_on_metrics_and_stops_the_monitor_with_it() -> None:
    source = ReplaySource(demo_cluster())
    container = build_container(
        Settings(), clock=ManualClock(), source_health=source.feed_health, source_name="replay"
    )
    sock = bind("127.0.0.1", 0)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    started = asyncio.Event()
    running = asyncio.create_task(serve(container, source, sock, started=started))
    try:
        await asyncio.wait_for(started.wait(), 30)
        assert [t for t in asyncio.all_tasks() if t.get_name() == MONITOR]
        async with httpx.AsyncClient() as c, asyncio.timeout(30):
            while True:  # the monitor's first measurement comes after one interval (0.5 s)
                r = await c.get(f"{url}/metrics")
                got = samples(r.text)
                if got.get((f"{EVENT_LOOP_LAGS}_count", ()), 0) >= 1:
                    break
                await asyncio.sleep(0.1)
        assert r.status_code == 200
        assert f"# HELP {EVENT_LOOP_LAG} " in r.text
        assert f"# TYPE {EVENT_LOOP_LAG} gauge" in r.text
        assert got[(EVENT_LOOP_LAG, ())] >= 0
    finally:
        running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        sock.close()
    assert not [t for t in asyncio.all_tasks() if t.get_name() == MONITOR and not t.done()]
