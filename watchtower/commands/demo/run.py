"""`watchtower demo`: the whole service on a simulated cluster, with somewhere for its notifications to go.

Started here, all on 127.0.0.1 and all stopped on the way out: the simulator and its DCGM/KSM exporter, an
SMTP sink and a webhook sink (signatures checked) as the demo receivers, a local Prometheus scraping the
exporter and Watchtower when the `prometheus` binary is installed, and the service itself. Everything it
writes goes to a temporary directory removed at exit.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import shutil
import socket
import tempfile
import time
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from watchtower.adapters.demo_sinks import SmtpSink, WebhookSink, new_secret
from watchtower.api.container import Container
from watchtower.commands.demo.past_week_process import Backfill, past_week_in_background
from watchtower.config.alerting import (
    AlertingConfig,
    EmailConfig,
    ReceiverConfig,
    RouteConfig,
    WebhookConfig,
)
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.config.prometheus import PrometheusConfig
from watchtower.domain.fairness.week import IsoWeek
from watchtower.ports import AlertStore, FairnessHistory

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


@dataclass
class _Started:
    """What the demo has started before the service is built: its files, sinks, simulator and socket."""

    workdir: Path
    secret: str  # the webhook sink's signing secret
    token: str  # the API token printed for creating silences
    smtp: SmtpSink
    webhooks: WebhookSink
    sim: Any  # SimulatedCluster
    exporter: Any  # the simulator's DCGM/KSM exporter
    sock: socket.socket
    port: int
    url: str


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
    from watchtower.bootstrap import build_container
    from watchtower.commands.demo.past_week import past_week_of

    base = base or Settings()
    stack = contextlib.AsyncExitStack()
    try:
        started = await _start_sinks_and_cluster(opts, base, stack)
        prom, prom_note = await _start_prometheus(opts, started, stack)
        settings = demo_settings(
            base,
            opts=opts,
            url=started.url,
            smtp_port=started.smtp.port,
            hook_url=started.webhooks.hook_url,
            secret=started.secret,
            store_path=str(started.workdir / "alerts.db"),
            prometheus_url=prom.url if prom is not None else None,
            api_token=started.token,
        )
        store, history = _open_stores(settings, started.workdir, stack)
        links = {"mail and webhook sinks (JSON)": started.webhooks.url}
        if prom is not None:
            links["Prometheus"] = prom.url
        past = past_week_of(settings, started.sim.now()) if opts.past_week and history is not None else None
        if past is not None:
            links[f"fairness report {past}: a simulated past week, recorded at full speed"] = (
                f"{started.url}/reports/fairness/{past}"
            )
        container = build_container(
            settings,
            clock=started.sim,
            source_health=started.sim.feed_health,
            source_name="sim",
            alert_store=store,
            links=links,
            history=history,
        )
        _print_urls(echo, settings, started, prom, prom_note)
        if past is not None:
            echo(f"  past week       {started.url}/reports/fairness/{past} (being simulated at full speed)")
            stack.push_async_callback(_record_past_week(settings, past, opts, started, prom, container, echo))
        await _serve_until_stopped(container, started, prom, links, on_ready, handle_signals)
    finally:
        await stack.aclose()


async def _start_sinks_and_cluster(
    opts: DemoOptions, base: Settings, stack: contextlib.AsyncExitStack
) -> _Started:
    """Start the SMTP and webhook sinks, the simulated cluster's exporter and the listening socket, each
    stopped by `stack`; return them with the temporary directory, the webhook secret and the API token."""
    from watchtower.commands.demo.warm import demo_cluster
    from watchtower.runtime.sockets import bind

    workdir = Path(tempfile.mkdtemp(prefix="watchtower-demo-"))
    secret = new_secret()
    token = secrets.token_urlsafe(18)
    stack.callback(shutil.rmtree, workdir, True)
    smtp = SmtpSink().start()
    stack.callback(smtp.stop)
    sim_cfg = base.simulator.model_copy(
        update={
            **demo_simulator(base.simulator),
            **{k: v for k, v in (("seed", opts.seed), ("speed", opts.speed)) if v is not None},
        }
    )
    sim = demo_cluster(sim_cfg)
    # The sender signs with the cluster's clock (simulated here): the sink checks against the same.
    webhooks = WebhookSink(secret=secret, now=sim.now, smtp=smtp).start()
    stack.callback(webhooks.stop)
    exporter = await sim.serve_metrics("127.0.0.1", 0)
    stack.push_async_callback(exporter.close)
    sock = bind("127.0.0.1", opts.port)
    stack.callback(sock.close)
    port = sock.getsockname()[1]
    return _Started(
        workdir=workdir,
        secret=secret,
        token=token,
        smtp=smtp,
        webhooks=webhooks,
        sim=sim,
        exporter=exporter,
        sock=sock,
        port=port,
        url=f"http://127.0.0.1:{port}",
    )


async def _start_prometheus(
    opts: DemoOptions, started: _Started, stack: contextlib.AsyncExitStack
) -> tuple[Any, str]:
    """Start the local Prometheus (when asked and installed), stopped by `stack`; return it (None when not
    started) and, when not, the words saying why."""
    from watchtower.adapters.prometheus.process import (
        INSTALL_HINT,
        LocalPrometheusError,
        start_local_prometheus,
    )

    if not opts.prometheus:
        return None, "not started (--no-prometheus)"
    prom = None
    prom_note = ""
    try:
        prom = await asyncio.to_thread(
            start_local_prometheus,
            exporter_port=started.exporter.port,
            watchtower_port=started.port,
            scrape_interval=SCRAPE_EVERY,
            # The past week's blocks (simulated time) may be months older than the live samples
            # (real time): kept for that long and a week, whatever the machine's clock says.
            retention=max(15 * 86400.0, time.time() - started.sim.now()) + 2 * WEEK,
            lookback_delta=BACKFILL_LOOKBACK,
        )
    except LocalPrometheusError as e:
        prom_note = f"did not start ({str(e)[:300]})"
    if prom is not None:
        stack.callback(prom.stop)
    elif not prom_note:
        prom_note = "not started: " + INSTALL_HINT
    return prom, prom_note


def _open_stores(
    settings: Settings, workdir: Path, stack: contextlib.AsyncExitStack
) -> tuple[AlertStore, FairnessHistory | None]:
    """Open the demo's alert store and, in the same file, its fairness history; both closed by `stack`."""
    from watchtower.adapters.store.sqlite import SQLiteAlertStore
    from watchtower.bootstrap import open_history

    store = SQLiteAlertStore(workdir / "alerts.db")
    stack.callback(store.close)
    history = open_history(settings, store)  # the fairness history, in the same file
    if history is not None:
        stack.callback(history.close)
    return store, history


def _print_urls(
    echo: Callable[[str], object], settings: Settings, started: _Started, prom: Any, prom_note: str
) -> None:
    url = started.url
    echo(f"Watchtower demo: a simulated cluster at {settings.simulator.speed:g}x real time")
    echo(f"  status page     {url}/")
    echo(f"  alerts          {url}/api/v1/alerts")
    echo(f"  idle GPUs       {url}/api/v1/gpu/idle")
    echo(f"  Prometheus      {prom.url + '/' if prom is not None else prom_note}")
    echo(f"  SMTP sink       127.0.0.1:{started.smtp.port} (mail to {MAIL_TO})")
    echo(f"  webhook sink    {started.webhooks.hook_url} (Standard Webhooks signatures checked)")
    echo(f"  sinks received  {started.webhooks.url}/")
    echo(f"  API token       {started.token} (Authorization: Bearer …, to create silences)")


def _record_past_week(
    settings: Settings,
    past: IsoWeek,
    opts: DemoOptions,
    started: _Started,
    prom: Any,
    container: Container,
    echo: Callable[[str], object],
) -> Callable[[], Any]:
    """Start recording the simulated past week in the background (its metrics backfilled into `prom` when
    there is one), its report built ahead once recorded; return what stops it."""
    backfill = (
        Backfill(
            prom,
            started.workdir,
            exporter=f"127.0.0.1:{started.exporter.port}",
            watchtower=f"127.0.0.1:{started.port}",
        )
        if prom is not None
        else None
    )
    reports = container.fairness
    sim = started.sim

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

    return past_week_in_background(
        settings, past, echo, backfill, span=opts.past_week_span, warm=warm, keep=keep
    )


async def _serve_until_stopped(
    container: Container,
    started: _Started,
    prom: Any,
    links: dict[str, str],
    on_ready: Callable[[DemoRun], object] | None,
    handle_signals: bool,
) -> None:
    """Serve until cancelled (or a signal, with `handle_signals`); `on_ready` is handed the running demo
    once the server accepts connections."""
    from watchtower.runtime.serve import serve

    sim = started.sim
    accepting = asyncio.Event()
    serving = asyncio.create_task(
        serve(container, sim, started.sock, started=accepting, handle_signals=handle_signals)
    )
    try:
        waiter = asyncio.create_task(accepting.wait())
        await asyncio.wait({serving, waiter}, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if accepting.is_set() and on_ready is not None:
            on_ready(
                DemoRun(
                    url=started.url,
                    container=container,
                    sim=sim,
                    smtp=started.smtp,
                    webhooks=started.webhooks,
                    prometheus_url=prom.url if prom is not None else None,
                    api_token=started.token,
                    links=links,
                )
            )
        await serving
    finally:
        if not serving.done():
            serving.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await serving
