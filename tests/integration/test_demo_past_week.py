"""The demo's simulated past week: a second simulated cluster run at full speed through (the first hours
of) a past ISO week, recorded into the store by the service's recorder, then reported by the same report
service as any week. Real parts: the simulator, the queue tracker, the recorder, the SQLite history, the report
service. A shortened week (`span`) keeps the run to seconds; `watchtower demo` simulates the whole week."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import threading
from datetime import UTC
from pathlib import Path

import httpx
import pytest

from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.adapters.prometheus.fairness import PrometheusFairness
from watchtower.commands.demo.past_week import past_week_of, record_past_week
from watchtower.commands.demo.run import DemoOptions, DemoRun, run_demo
from watchtower.commands.demo.warm import demo_cluster
from watchtower.commands.report import render_report, report_once
from watchtower.config import settings_from_mapping
from watchtower.config.model import SimulatorConfig
from watchtower.domain.fairness.history import WaitEpisode
from watchtower.simulator.cluster import DEFAULT_START

SPAN = 6 * 3600.0
DEMO_SPAN = 30 * 3600.0  # past a day: the first day's answers are asked while the rest is recorded


async def test_the_past_week_is_recorded_closed_at_its_end_and_reported(tmp_path: Path) -> None:
    settings = settings_from_mapping({"store": {"path": str(tmp_path / "state.db")}}, env={})
    week = past_week_of(settings, DEFAULT_START)
    assert str(week) == "2025-W52"  # the last complete week before the demo's clock
    start, end = week.bounds(UTC)
    # A wait the live demo's recorder holds open (its cluster starts after the past week): left alone.
    live = WaitEpisode("wait:live", "pod", "nlp", "nlp", "low", "Job/live", 1, DEFAULT_START, None, "waiting")
    h = SQLiteFairnessHistory(settings.store.path)
    h.record([live])
    h.close()

    done = await asyncio.to_thread(record_past_week, settings, week, threading.Event(), span=SPAN)
    assert done.completed and done.ticks == SPAN / 120 + 1  # and one at the start

    h = SQLiteFairnessHistory(settings.store.path)
    episodes, _ = h.open_waits()
    assert episodes == [live]  # the past cluster's waits were closed where it ended
    assert h.history_coverage(start, start + SPAN) == pytest.approx(
        SPAN / 3600
    )  # every minute, the first too
    # The waits still open when the past cluster ended are closed there (with the whole week: at its end,
    # where the report counts them as censored), so none stays open for the live recorder.
    assert [e for e in h.episodes(start, end) if e.ended == start + SPAN and e.outcome == "gone"]
    # Each wait's first start estimate was checked against its start; those still waiting at the end are
    # closed there too (issue 33).
    checked = h.estimates_started(start, end)
    assert checked and all(start < g.given_at <= g.started <= start + SPAN for g in checked if g.started)
    assert h.estimates_open() == []
    h.close()

    report = await report_once(settings, week, team=None, now=DEFAULT_START)
    assert sum(w.finished for t in report.teams for w in t.waits) > 0
    assert sum(t.preemptions_suffered.get("low", 0) for t in report.teams) > 0
    # The report's line per tier counts every checked estimate of the week.
    assert sum(a.n for a in report.estimates) == len(checked)
    assert "START ESTIMATES" in render_report(report, "text")
    # The week after has none of the past cluster's waits: only the live one is still waiting.
    nxt = await report_once(settings, week.previous(-1), team=None, now=DEFAULT_START + 3600)
    assert sum(w.censored for t in nxt.teams for w in t.waits) == 1


def test_stopping_it_ends_the_run_early(tmp_path: Path) -> None:
    settings = settings_from_mapping({"store": {"path": str(tmp_path / "state.db")}}, env={})
    stop = threading.Event()
    stop.set()
    done = record_past_week(settings, past_week_of(settings, DEFAULT_START), stop)
    assert not done.completed and done.ticks == 0


def _simulated_gpu_hours(cfg: SimulatorConfig, start: float, span: float, step: float) -> dict[str, float]:
    """GPU-hours per team as the past week's cluster ran them, from the simulator's own pods: the
    `nvidia.com/gpu` of each Running pod at every `step` of (start, start + span], held for the step. The
    same seed and 10 s substeps give the cluster the demo simulated."""
    sim = demo_cluster(cfg.model_copy(update={"seed": cfg.seed + 1, "metrics_port": 0}), start=start)
    hours: dict[str, float] = {}
    t = start + step
    while t <= start + span:
        sim.step(t - sim.now())
        for p in sim.live_pods():
            if p.phase == "Running" and p.gpus:
                team = sim.namespaces[p.namespace]["metadata"]["labels"].get("team", p.namespace)
                hours[team] = hours.get(team, 0.0) + p.gpus * step / 3600
        t += step
    return hours


@pytest.mark.prometheus
async def test_the_demos_past_week_report_reads_the_simulators_gpu_hours_backfilled_into_its_prometheus() -> (
    None
):
    """The demo as `make demo` runs it (its real Prometheus, promtool, the service's report page), with a
    shortened past week: the report shows Prometheus figures, and they are the simulator's."""
    if shutil.which("prometheus") is None or shutil.which("promtool") is None:
        pytest.fail("prometheus/promtool not on PATH: run tests/setup/system-deps.sh")
    lines: list[str] = []
    ready = asyncio.Event()
    runs: list[DemoRun] = []

    def echo(line: str) -> None:
        lines.append(line)
        if "fairness report is ready" in line:
            ready.set()

    demo = asyncio.create_task(
        run_demo(DemoOptions(past_week_span=DEMO_SPAN), echo=echo, on_ready=runs.append)
    )
    try:
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({demo, waiter}, timeout=300, return_when=asyncio.FIRST_COMPLETED)
        assert ready.is_set(), lines
        assert any("samples backfilled into Prometheus" in line for line in lines), lines
        run = runs[0]
        settings = run.container.settings
        week = past_week_of(settings, run.sim.now())
        start, _ = week.bounds(UTC)
        async with httpx.AsyncClient(base_url=run.url, timeout=180) as c:  # a loaded machine
            got = await c.get("/api/v1/reports/fairness", params={"week": str(week)})
            page = await c.get(f"/reports/fairness/{week}")
        assert got.status_code == 200, got.text
        report = got.json()
        step = settings.fairness.step
        # Every step of the simulated span has each source's samples (and the step after it sees the last).
        hours = {s["source"]: s["hours_present"] for s in report["coverage"]}
        for source in ("kube-state-metrics", "dcgm-exporter", "watchtower"):
            assert DEMO_SPAN / 3600 <= hours[source] <= (DEMO_SPAN + step) / 3600, (source, hours)
        expected = _simulated_gpu_hours(settings.simulator, start, DEMO_SPAN, step)
        assert expected and sum(expected.values()) > 0
        used = {t["team"]: t["used_gpu_hours"] for t in report["teams"] if t["used_gpu_hours"]}
        assert used == pytest.approx(expected, abs=1e-4)  # the JSON rounds to 4 digits
        # Capacity: the nodes' allocatable nvidia.com/gpu (DRA nodes publish theirs in ResourceSlices).
        gpus = sum(int(n["status"]["allocatable"].get("nvidia.com/gpu", 0)) for n in run.sim.nodes.values())
        assert report["cluster"]["gpu_hours"]["capacity"] == pytest.approx(gpus * DEMO_SPAN / 3600, abs=1e-4)
        # The first day was in blocks while the rest was recorded: its answers were asked ahead.
        usage = run.container.fairness.metrics if run.container.fairness is not None else None
        assert isinstance(usage, PrometheusFairness) and usage.kept > 0
        # The page a user opens from the status page: the week's data is there (not "no source reported").
        assert page.status_code == 200 and "No source reported any data" not in page.text
    finally:
        demo.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await demo


async def test_the_demo_offers_a_ready_replay_of_its_past_week_linked_from_status_and_report() -> None:
    """The demo with a shortened past week and no Prometheus: once the week is recorded, its replay runs in
    the service's replay pool (real worker processes) under the demo's policy and the one without medium
    preemption, and the status page and the week's report link its page, which shows both runs; the week's
    report has its start-estimate lines and the status page says how good the estimates were."""
    lines: list[str] = []
    runs: list[DemoRun] = []
    offered = asyncio.Event()

    def echo(line: str) -> None:
        lines.append(line)
        if "its replay" in line:
            offered.set()

    demo = asyncio.create_task(
        run_demo(DemoOptions(past_week_span=SPAN, prometheus=False), echo=echo, on_ready=runs.append)
    )
    try:
        waiter = asyncio.create_task(offered.wait())
        await asyncio.wait({demo, waiter}, timeout=300, return_when=asyncio.FIRST_COMPLETED)
        assert offered.is_set(), lines
        run = runs[0]
        week = past_week_of(run.container.settings, run.sim.now())
        page_path = run.container.week_replays[str(week)]
        async with httpx.AsyncClient(base_url=run.url, timeout=120) as c:
            status = await c.get("/")
            assert status.status_code == 200 and "replay of last week" in status.text
            assert page_path in status.text
            page = await c.get(page_path)
            for _ in range(240):  # queued, then running in the pool: the page answers 202 meanwhile
                if page.status_code != 202:
                    break
                await asyncio.sleep(0.5)
                page = await c.get(page_path)
            report = await c.get(f"/reports/fairness/{week}")
        assert page.status_code == 200, page.text
        assert (
            "the demo&#39;s (medium preempts low)" in page.text
            or "the demo's (medium preempts low)" in page.text
        )
        assert "medium without preemption" in page.text
        assert "observed" in page.text  # the simulator's own waits, beside the replays
        assert report.status_code == 200 and page_path in report.text
        # How good the start estimates were in the past week (issue 33): a line per tier in the report, and
        # on the status page beside the waiting work's estimates, once the live recorder has read them.
        assert '<section id="estimates">' in report.text
        async with httpx.AsyncClient(base_url=run.url, timeout=120) as c:
            for _ in range(120):  # the figures are read every 5 simulated minutes: 5 s at the demo's 60x
                status = await c.get("/")
                if "estimates for this tier" in status.text:
                    break
                await asyncio.sleep(0.5)
        assert "estimates for this tier" in status.text
    finally:
        demo.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await demo
