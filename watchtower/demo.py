"""`watchtower demo`: the whole service on a simulated cluster, with somewhere for its notifications to go.

Started here, all on 127.0.0.1 and all stopped on the way out: the simulator and its DCGM/KSM exporter, an
SMTP sink and a webhook sink (signatures checked) as the demo receivers, a local Prometheus scraping the
exporter and Watchtower when the `prometheus` binary is installed, and the service itself. Everything it
writes goes to a temporary directory removed at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import shutil
import tempfile
import time
import zoneinfo
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from watchtower.adapters.demo_sinks import SmtpSink, WebhookSink, new_secret
from watchtower.api.container import Container
from watchtower.config.alerting import (
    AlertingConfig,
    EmailConfig,
    ReceiverConfig,
    RouteConfig,
    WebhookConfig,
)
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.config.prometheus import PrometheusConfig

log = logging.getLogger(__name__)

RECEIVER = "demo-oncall"
MAIL_TO = "oncall@demo.invalid"
# Wall-clock seconds: Prometheus stamps samples with real time, however fast the simulator runs.
SCRAPE_EVERY = 2.0
IDLE_WINDOW = 30.0
WEEK = 7 * 86400.0
# The demo's Prometheus: an instant selector sees a series this long after its last sample. Backfilled
# samples (every fairness.step, 5 minutes by default) have no staleness markers: with Prometheus' default
# of 5 minutes a pod gone at one step would still be counted at the next. Live scrapes (every 2 s, with
# staleness markers) are not affected.
BACKFILL_LOOKBACK = 240.0
DEMO_DRA_NODES = 2  # nodes whose GPUs NVIDIA's DRA driver offers: the story's DRA Job waits for them


@dataclass
class DemoOptions:
    port: int = 0
    seed: int | None = None
    prometheus: bool = True
    speed: float | None = None  # simulated seconds per real second (default: the simulator's, 60)
    evaluate_every: float = 2.0  # real seconds between evaluations
    past_week: bool = True  # simulate the last complete week at full speed, for its fairness report
    past_week_span: float | None = None  # simulate only its first seconds (a shorter past, for tests)


@dataclass
class DemoRun:
    """A running demo, handed to `on_ready` (tests read the sinks and the container through it)."""

    url: str
    container: Container
    sim: Any  # SimulatedCluster
    smtp: SmtpSink
    webhooks: WebhookSink
    prometheus_url: str | None
    api_token: str
    links: dict[str, str] = field(default_factory=dict)


def demo_simulator(sim: SimulatorConfig) -> dict[str, Any]:
    """Return what the demo changes in the simulator: DRA-only nodes, so that its story shows DRA GPUs."""
    return {"dra_nodes": sim.dra_nodes or DEMO_DRA_NODES}


def demo_settings(
    base: Settings,
    *,
    opts: DemoOptions,
    url: str,
    smtp_port: int,
    hook_url: str,
    secret: str,
    store_path: str,
    prometheus_url: str | None,
    api_token: str,
) -> Settings:
    """Return `base` with the demo's simulator, receivers (the sinks), store, token and Prometheus."""
    sim_update: dict[str, Any] = {"metrics_port": 0}  # the demo serves the exporter itself
    sim_update.update(demo_simulator(base.simulator))
    if opts.seed is not None:
        sim_update["seed"] = opts.seed
    if opts.speed is not None:
        sim_update["speed"] = opts.speed
    receiver = ReceiverConfig(
        name=RECEIVER,
        email=[
            EmailConfig.model_validate(
                {
                    "to": [MAIL_TO],
                    "from": "watchtower@demo.invalid",
                    "smarthost": "127.0.0.1",
                    "port": smtp_port,
                    "security": "none",
                }
            )
        ],
        webhooks=[WebhookConfig(url=hook_url, secret=SecretStr(secret))],
    )
    alerting = AlertingConfig(
        rules=base.alerting.rules,
        route=RouteConfig(receiver=RECEIVER, group_by=["alertname", "namespace"]),
        receivers=[receiver],
        delivery=base.alerting.delivery,
        store_path=store_path,
    )
    prometheus = None
    if prometheus_url is not None:
        prometheus = PrometheusConfig(
            url=prometheus_url,
            timeout=5.0,
            retries=1,
            scrape_interval=SCRAPE_EVERY,
            query_every=5.0,
            query_step=SCRAPE_EVERY,
            idle_window=IDLE_WINDOW,
        )
    return base.model_copy(
        update={
            "cluster": base.cluster.model_copy(update={"source": "sim"}),
            "simulator": base.simulator.model_copy(update=sim_update),
            # Simulated time runs `speed` times faster: evaluate often enough that the page moves smoothly.
            "queue": base.queue.model_copy(update={"evaluate_every": opts.evaluate_every}),
            "server": base.server.model_copy(
                update={"host": "127.0.0.1", "external_url": url, "api_token": SecretStr(api_token)}
            ),
            "alerting": alerting,
            "prometheus": prometheus,
        }
    )


async def run_demo(
    opts: DemoOptions,
    *,
    echo: Callable[[str], object] = print,
    on_ready: Callable[[DemoRun], object] | None = None,
    base: Settings | None = None,
    handle_signals: bool = False,
) -> None:
    """Run the demo until cancelled (or, with `handle_signals`, SIGTERM/SIGINT); every part it started is
    stopped on the way out."""
    from watchtower.adapters.prometheus.process import (
        INSTALL_HINT,
        LocalPrometheusError,
        start_local_prometheus,
    )
    from watchtower.adapters.store.sqlite import SQLiteAlertStore
    from watchtower.bootstrap import bind, build_container, open_history, serve
    from watchtower.demo_past_week import past_week_of
    from watchtower.simulator.cluster import SimulatedCluster

    base = base or Settings()
    workdir = Path(tempfile.mkdtemp(prefix="watchtower-demo-"))
    secret = new_secret()
    token = secrets.token_urlsafe(18)
    stack = contextlib.AsyncExitStack()
    try:
        stack.callback(shutil.rmtree, workdir, True)
        smtp = SmtpSink().start()
        stack.callback(smtp.stop)
        sim_cfg = base.simulator.model_copy(
            update={
                **demo_simulator(base.simulator),
                **{k: v for k, v in (("seed", opts.seed), ("speed", opts.speed)) if v is not None},
            }
        )
        sim = SimulatedCluster(sim_cfg)
        # The sender signs with the cluster's clock (simulated here): the sink checks against the same.
        webhooks = WebhookSink(secret=secret, now=sim.now, smtp=smtp).start()
        stack.callback(webhooks.stop)
        exporter = await sim.serve_metrics("127.0.0.1", 0)
        stack.push_async_callback(exporter.close)
        sock = bind("127.0.0.1", opts.port)
        stack.callback(sock.close)
        port = sock.getsockname()[1]
        url = f"http://127.0.0.1:{port}"

        prom = None
        prom_note = ""
        if opts.prometheus:
            try:
                prom = await asyncio.to_thread(
                    start_local_prometheus,
                    exporter_port=exporter.port,
                    watchtower_port=port,
                    scrape_interval=SCRAPE_EVERY,
                    # The past week's blocks (simulated time) may be months older than the live samples
                    # (real time): kept for that long and a week, whatever the machine's clock says.
                    retention=max(15 * 86400.0, time.time() - sim.now()) + 2 * WEEK,
                    lookback_delta=BACKFILL_LOOKBACK,
                )
            except LocalPrometheusError as e:
                prom_note = f"did not start ({str(e)[:300]})"
            if prom is not None:
                stack.callback(prom.stop)
            elif not prom_note:
                prom_note = "not started: " + INSTALL_HINT
        else:
            prom_note = "not started (--no-prometheus)"

        settings = demo_settings(
            base,
            opts=opts,
            url=url,
            smtp_port=smtp.port,
            hook_url=webhooks.hook_url,
            secret=secret,
            store_path=str(workdir / "alerts.db"),
            prometheus_url=prom.url if prom is not None else None,
            api_token=token,
        )
        store = SQLiteAlertStore(workdir / "alerts.db")
        stack.callback(store.close)
        history = open_history(settings, store)  # the fairness history, in the same file
        if history is not None:
            stack.callback(history.close)
        links = {"mail and webhook sinks (JSON)": webhooks.url}
        if prom is not None:
            links["Prometheus"] = prom.url
        past = past_week_of(settings, sim.now()) if opts.past_week and history is not None else None
        if past is not None:
            links[f"fairness report {past}: a simulated past week, recorded at full speed"] = (
                f"{url}/reports/fairness/{past}"
            )
        container = build_container(
            settings,
            clock=sim,
            source_health=sim.feed_health,
            source_name="sim",
            alert_store=store,
            links=links,
            history=history,
        )
        speed = settings.simulator.speed
        echo(f"Watchtower demo: a simulated cluster at {speed:g}x real time")
        echo(f"  status page     {url}/")
        echo(f"  alerts          {url}/api/v1/alerts")
        echo(f"  idle GPUs       {url}/api/v1/gpu/idle")
        echo(f"  Prometheus      {prom.url + '/' if prom is not None else prom_note}")
        echo(f"  SMTP sink       127.0.0.1:{smtp.port} (mail to {MAIL_TO})")
        echo(f"  webhook sink    {webhooks.hook_url} (Standard Webhooks signatures checked)")
        echo(f"  sinks received  {webhooks.url}/")
        echo(f"  API token       {token} (Authorization: Bearer …, to create silences)")
        if past is not None:
            echo(f"  past week       {url}/reports/fairness/{past} (being simulated at full speed)")
            backfill = (
                _Backfill(
                    prom, workdir, exporter=f"127.0.0.1:{exporter.port}", watchtower=f"127.0.0.1:{port}"
                )
                if prom is not None
                else None
            )
            reports = container.fairness

            async def warm() -> None:
                # The first build asks Prometheus for the week (half a minute for a busy one) and keeps its
                # settled answer: the page opens at once when "ready" is printed.
                if reports is not None:
                    await reports.build(past, now=sim.now())

            async def keep(settled: float) -> None:
                # A day of the past week is in blocks: Prometheus loads them, and that day's answers are
                # asked while the next is recorded, so that the report waits only for the last.
                from watchtower.adapters.prometheus.fairness import PrometheusFairness

                usage = reports.metrics if reports is not None else None
                if backfill is None or not isinstance(usage, PrometheusFairness):
                    return
                await asyncio.to_thread(backfill.prom.restart)
                start, end = past.bounds(zoneinfo.ZoneInfo(settings.fairness.timezone))
                await asyncio.to_thread(usage.keep_settled, start, end, settings.fairness.step, settled)

            stack.push_async_callback(
                _past_week_in_background(
                    settings, past, echo, backfill, span=opts.past_week_span, warm=warm, keep=keep
                )
            )
        started = asyncio.Event()
        serving = asyncio.create_task(
            serve(container, sim, sock, started=started, handle_signals=handle_signals)
        )
        try:
            waiter = asyncio.create_task(started.wait())
            await asyncio.wait({serving, waiter}, return_when=asyncio.FIRST_COMPLETED)
            waiter.cancel()
            if started.is_set() and on_ready is not None:
                on_ready(
                    DemoRun(
                        url=url,
                        container=container,
                        sim=sim,
                        smtp=smtp,
                        webhooks=webhooks,
                        prometheus_url=prom.url if prom is not None else None,
                        api_token=token,
                        links=links,
                    )
                )
            await serving
        finally:
            if not serving.done():
                serving.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await serving
    finally:
        await stack.aclose()


@dataclass(frozen=True)
class _Backfill:
    """The demo's Prometheus and its scrape targets, for the past week's samples."""

    prom: Any  # LocalPrometheus
    workdir: Path
    exporter: str
    watchtower: str


def _record_and_backfill(
    settings: Settings,
    week: Any,
    stop: Any,
    backfill: _Backfill | None,
    span: float | None,
    on_settled: Callable[[float], object] | None = None,
) -> tuple[Any, str]:
    """Record the past week (in a worker thread, the recording in a process of its own); with `backfill`, write its samples into the demo's Prometheus
    as blocks and restart it so they are loaded now. Return what was recorded and a note on the metrics."""
    from watchtower.adapters.prometheus.backfill import PromtoolMissing, find_promtool
    from watchtower.demo_past_week import MetricsTargets

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
    from watchtower.demo_past_week import record_past_week

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


def _past_week_in_background(
    settings: Settings,
    week: Any,
    echo: Callable[[str], object],
    backfill: _Backfill | None = None,
    *,
    span: float | None = None,
    warm: Callable[[], Awaitable[None]] | None = None,
    keep: Callable[[float], Awaitable[None]] | None = None,
) -> Callable[[], Any]:
    """Start recording the simulated past week (and backfilling its metrics) in a process of its own,
    watched by a worker thread; return what stops it and waits for it (so the store is closed only after
    its last write). While it records, `keep(t)` is awaited, one at a time, each time its metrics up to
    `t` are blocks (only the latest `t` when several came meanwhile); once it is recorded, the `keep`
    under way ends and `warm()` is awaited."""
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
