"""The demo's past week: a second simulated cluster (the demo's seed + 1, so no uid is shared) run at full
speed through the last complete ISO week before the demo's clock, recorded into the demo's store by the
service's own recorder (the same `record_tick` through the same FairnessHistory), so the report of that week
is made by the same code path as any other.

It runs in a process of its own beside the live demo (past_week_process.py). The waits still open at the week's end are closed there as
`gone`: that cluster ends with the week, and a wait ended exactly at the end is still censored in that week's
report and adds nothing to the next. Every write is an upsert by key, so a live recorder that read one of
these waits while it was open and closed it later changes nothing (the earlier closing is kept).

With `metrics` (the demo's Prometheus is there), it also samples, every `metrics.step` simulated seconds,
what the demo's Prometheus would have scraped: the simulator's kube-state-metrics and DCGM series (rendered
as its exporter serves them) and Watchtower's own /metrics after the latest evaluation, each with the job
and instance of the demo's scrape configuration, keeping the series the fairness report reads. The demo
turns that file into blocks for its Prometheus (watchtower/adapters/prometheus/backfill.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import math
import threading
import zoneinfo
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

from watchtower.adapters.prometheus.backfill import BlocksWritten, Wanted
from watchtower.config.model import Settings
from watchtower.domain.fairness.week import IsoWeek
from watchtower.simulator.pods import SimWorkload

log = logging.getLogger(__name__)

STEP = 120.0  # simulated seconds between ticks: within the recorder's heartbeat gap, so the week is covered


@dataclass(frozen=True, slots=True)
class MetricsTargets:
    """Where the past week's samples go and the scrape targets they are labelled with (host:port)."""

    workdir: Path  # for the OpenMetrics files (removed once turned into blocks)
    into: Path  # the Prometheus data directory the blocks are written to
    promtool: str  # its path
    exporter: str  # the simulator's exporter: jobs dcgm-exporter and kube-state-metrics
    watchtower: str  # Watchtower's /metrics: job watchtower
    step: float = 300.0  # simulated seconds between samples: the report's step (fairness.step)


@dataclass(frozen=True, slots=True)
class PastWeek:
    week: IsoWeek
    ticks: int
    completed: bool  # False: stopped before the week's end (the demo was stopped)
    blocks: BlocksWritten | None = None  # with MetricsTargets: what was backfilled
    # The week's workloads as a replay trace (CSV, watchtower/replay/trace.py), from the simulator's own
    # record of each (simulator/replay_trace.py): what the demo's ready replay runs.
    trace: str = ""


def kept_metrics(settings: Settings) -> Wanted:
    """Return the series the fairness report's queries read (prometheus/backfill.selected_series)."""
    from watchtower.adapters.prometheus.backfill import selected_series
    from watchtower.adapters.prometheus.fairness import week_expressions
    from watchtower.bootstrap import fairness_queries

    theta = settings.prometheus.idle_threshold if settings.prometheus is not None else 10.0
    exprs = week_expressions(fairness_queries(settings), 86400.0, 300.0, theta)
    return selected_series(exprs.values())


def _trace(settings: Settings, workloads: Iterable[SimWorkload]) -> str:
    from watchtower.replay.trace import format_csv
    from watchtower.simulator.replay_trace import trace_of

    return "".join(format_csv(trace_of(workloads, settings.tier_policy()).jobs))


def past_week_of(settings: Settings, now: float) -> IsoWeek:
    """Return the week the demo simulates: the last complete ISO week before `now`."""
    return IsoWeek.containing(now, zoneinfo.ZoneInfo(settings.fairness.timezone)).previous()


def record_past_week(
    settings: Settings,
    week: IsoWeek,
    stop: threading.Event,
    *,
    span: float | None = None,
    metrics: MetricsTargets | None = None,
    on_settled: Callable[[float], object] | None = None,
) -> PastWeek:
    """Simulate `week` at full speed and record it into the store `settings` name; return what was done.
    Blocking (run it in a thread); `stop` ends it early. `span`: simulate only the week's first `span`
    seconds, the cluster ending there (a shorter past, for tests). `metrics`: also backfill the samples the
    demo's Prometheus would have scraped into `metrics.into`, in files of a day from the week's start;
    `on_settled(t)` is called each time more of them are blocks: every sample up to `t` is in `into`."""
    return asyncio.run(_record(settings, week, stop, span, metrics, on_settled))


async def _record(
    settings: Settings,
    week: IsoWeek,
    stop: threading.Event,
    span: float | None,
    metrics: MetricsTargets | None,
    on_settled: Callable[[float], object] | None = None,
) -> PastWeek:
    import msgspec

    from watchtower.adapters.metrics.registry import WatchtowerMetrics
    from watchtower.adapters.prometheus.backfill import Backfill
    from watchtower.adapters.prometheus.fairness import PIECE
    from watchtower.bootstrap import (
        build_container,
        estimate_recorder,
        fairness_recorder,
        open_history,
        replay_recorder,
    )
    from watchtower.commands.demo.warm import demo_cluster
    from watchtower.domain.estimate_accuracy import OUTCOME_GONE
    from watchtower.services.estimate_record import estimates_of
    from watchtower.simulator.cluster import KINDS
    from watchtower.simulator.exporter import render_metrics

    start, end = week.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
    if span is not None:
        end = min(end, start + span)
    sim = demo_cluster(
        settings.simulator.model_copy(update={"seed": settings.simulator.seed + 1, "metrics_port": 0}),
        start=start,
    )
    # Its own connection to the demo's store file; the week can be simulated again, so its commits do
    # not wait for the disk.
    history = open_history(settings, sync_each_commit=False)
    if history is None:
        return PastWeek(week, 0, False)
    try:
        c = build_container(
            settings, clock=sim, source_health=sim.feed_health, source_name="sim", history=history
        )
        recorder = fairness_recorder(c, start_empty=True)
        assert recorder is not None  # the history was given
        replays = replay_recorder(c, start_empty=True)
        estimates = estimate_recorder(c, start_empty=True)
        w = c.queue_tracker
        for kind in KINDS:
            w.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
        out = (
            Backfill(
                metrics.workdir,
                keep=kept_metrics(settings),
                into=metrics.into,
                promtool=metrics.promtool,
                chunk=PIECE,  # a file per piece of the report's subqueries: each day can be asked once done
                origin=start,
            )
            if metrics is not None
            else None
        )

        names = set(out.keep) if out is not None else set()
        assert isinstance(c.metrics, WatchtowerMetrics)  # build_container's
        own = c.metrics

        def sample(at: float) -> None:
            # What a scrape at `at` reads: the exporter's series now, Watchtower's after its last evaluation.
            assert out is not None and metrics is not None
            for job, which in (("dcgm-exporter", "dcgm"), ("kube-state-metrics", "kube-state-metrics")):
                text = render_metrics(sim, at, which=which, only=names)
                out.add(text, at, job=job, instance=metrics.exporter)
            out.add(own.render_queue(names).decode(), at, job="watchtower", instance=metrics.watchtower)

        # Samples on the step's grid (epoch multiples, where the report's subqueries evaluate) in
        # (start, end]: Prometheus 2 counts a subquery step at the window's left edge and 3 does not, and
        # with none there both give the same figure.
        every = metrics.step if metrics is not None else math.inf
        grid = (math.floor(start / every) + 1) * every if metrics is not None else math.inf
        ticks = 0
        settled = -math.inf
        # Every workload the cluster ran, by identity: one stays listed for a quarter of an hour after it ends
        # (its pods' TTL), far longer than a tick, so none is missed.
        seen = {id(wl): wl for wl in sim.workloads}
        try:
            # A first tick at the week's start: the recorder marks the minutes from it, so the week's
            # first two minutes are not "missing" from the history's coverage.
            if not stop.is_set():
                first = w.evaluate(sim.now())
                await recorder.on_tick(first)
                if replays is not None:
                    await replays.on_tick(first)
                if estimates is not None:
                    await estimates.on_tick(first)
                ticks += 1
            while sim.now() < end and not stop.is_set():
                until = min(sim.now() + STEP, end)
                # The simulator steps in 10 s substeps whatever it is asked: stopping at a grid point
                # between two ticks changes nothing of the cluster.
                while grid < until:
                    sim.step(grid - sim.now())
                    sample(grid)
                    grid += every
                sim.step(until - sim.now())
                for wl in sim.workloads:
                    seen.setdefault(id(wl), wl)
                for kind, type_, raw in sim.drain():
                    w.on_change(kind, type_, raw)
                now = sim.now()
                tick = w.evaluate(now)
                w.prune(now)
                await recorder.on_tick(tick)
                if replays is not None:
                    await replays.on_tick(tick)
                if estimates is not None:
                    await estimates.on_tick(tick)
                ticks += 1
                if grid == now:  # a grid point on a tick: sampled after its evaluation, as scraped then
                    sample(grid)
                    grid += every
                if out is not None and on_settled is not None and (now_settled := out.settled()) > settled:
                    settled = now_settled
                    on_settled(settled)
        except BaseException:
            if out is not None:
                out.abort()
            raise
        if stop.is_set():
            if out is not None:
                out.abort()
            return PastWeek(week, ticks, False)
        blocks = out.close() if out is not None else None
        episodes, incidents = history.open_waits()
        history.record(
            [dataclasses.replace(e, ended=end, outcome="gone") for e in episodes if e.started < end],
            incidents=[dataclasses.replace(i, ended=end) for i in incidents if i.started < end],
        )
        # Likewise its estimates still waiting: nothing to check them against (the live ones, given after
        # the week, are left to the live recorder).
        if (kept := estimates_of(history)) is not None:
            kept.record_estimates(
                [
                    dataclasses.replace(g, outcome=OUTCOME_GONE)
                    for g in kept.estimates_open()
                    if g.given_at <= end
                ]
            )
        return PastWeek(week, ticks, True, blocks, _trace(settings, seen.values()))
    finally:
        history.close()
