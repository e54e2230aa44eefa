"""The composition root and the command line: `watchtower check-config | analyze | run | demo`."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import sys
import time
from collections.abc import Awaitable, Callable, Coroutine, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from prometheus_client import CollectorRegistry

from watchtower.config import ConfigError, Settings, load_settings
from watchtower.container import Container
from watchtower.ports import Clock, ClusterSource, SystemClock

if TYPE_CHECKING:
    from watchtower.adapters.store_sqlite import SQLiteAlertStore
    from watchtower.domain.queue import QueueSnapshot
    from watchtower.services.alerting import AlertStore
    from watchtower.services.gpu_usage import GpuUsageService

cli = typer.Typer(
    add_completion=False, no_args_is_help=True, help="Watch the GPU job queue of a Kubernetes cluster."
)


def _settings_or_exit(path: Path | None):  # type: ignore[no-untyped-def]
    try:
        return load_settings(path)
    except ConfigError as e:
        typer.echo(f"{e.source}: configuration is not valid:", err=True)
        for p in e.problems:
            typer.echo(f"  {p}", err=True)
        raise typer.Exit(2) from None


@cli.command("check-config")
def check_config(file: Annotated[Path, typer.Argument(help="YAML configuration file")]) -> None:
    """Validate a configuration file; list every problem with its YAML path."""
    s = _settings_or_exit(file)
    tiers = ", ".join(f"{t.name}≥{t.min_priority}" for t in s.tier_policy().tiers)
    typer.echo(f"{file}: OK (tiers: {tiers}; cluster source: {s.cluster.source})")


def _parse_at(at: str | None) -> float:
    if at is None:
        return time.time()
    from datetime import datetime

    try:
        dt = datetime.fromisoformat(at.replace("Z", "+00:00"))
    except ValueError:
        raise typer.BadParameter(f"{at!r} is not an RFC 3339 time such as 2026-11-29T12:00:00Z") from None
    if dt.tzinfo is None:
        raise typer.BadParameter("give a time zone, e.g. 2026-11-29T12:00:00Z")
    return dt.timestamp()


@cli.command()
def analyze(
    objects: Annotated[
        Path, typer.Option("--objects", help="output of kubectl get pods,events,nodes,... -A -o json")
    ],
    at: Annotated[str | None, typer.Option(help="evaluate as of this RFC 3339 time (default: now)")] = None,
    fmt: Annotated[str, typer.Option("--format", help="table or json")] = "table",
    config: Annotated[
        Path | None, typer.Option(help="configuration file (default: built-in defaults)")
    ] = None,
) -> None:
    """Print the queue a dump describes: waits vs thresholds and why, gangs, preemptions, quota, fragmentation."""
    from watchtower.adapters.kube.decoder import DecodeError, ObjectDecoder
    from watchtower.services.analyze import analysis_dict
    from watchtower.services.analyze import analyze as run_analysis
    from watchtower.services.table import render

    if fmt not in ("table", "json"):
        raise typer.BadParameter("--format is table or json")
    settings = _settings_or_exit(config)
    now = _parse_at(at)
    try:
        data = sys.stdin.buffer.read() if str(objects) == "-" else objects.read_bytes()
    except OSError as e:
        typer.echo(f"{objects}: cannot read: {e.strerror}", err=True)
        raise typer.Exit(2) from None
    policy = settings.queue_policy()
    decoder = ObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
    )
    try:
        result = run_analysis(data, policy=policy, decoder=decoder, at=now)
    except DecodeError as e:
        typer.echo(f"{objects}: not a Kubernetes List in JSON: {e}", err=True)
        raise typer.Exit(2) from None
    doc = analysis_dict(result, policy, settings)
    if fmt == "json":
        sys.stdout.buffer.write(orjson.dumps(doc, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS) + b"\n")
    else:
        typer.echo(render(doc), nl=False)


# ---- the live service: composition root ----------------------------------------------------------


def build_container(
    settings: Settings,
    *,
    clock: Clock,
    source_health: Callable[[], Mapping[str, Any]],
    source_name: str,
    registry: CollectorRegistry | None = None,
    alert_store: AlertStore | None = None,
    links: Mapping[str, str] | None = None,
) -> Container:
    """Return the service's parts wired together: metrics on their own registry, the watcher, the GPU-usage
    service (when `settings.prometheus` is set) and alerting (when an `alert_store` is given).

    Snapshot consumers run in this order each tick: GPU usage, then alerting (which reads the GPU
    findings of the same tick), then whatever the API adds.
    """
    from watchtower.adapters.metrics import WatchtowerMetrics
    from watchtower.services.alerting import AlertingMetrics, AlertingService
    from watchtower.services.gpu_usage import gpu_usage_from_settings
    from watchtower.services.watch import Watcher, feed_health_of

    metrics = WatchtowerMetrics(
        registry=registry if registry is not None else CollectorRegistry(),
        tier_bounds=[b for t in settings.tiers for b in (t.warn_after, t.critical_after)],
        feed_health=lambda: feed_health_of(source_health()),
    )
    watcher = Watcher(settings=settings, clock=clock, metrics=metrics, source_health=source_health)
    gpu = gpu_usage_from_settings(
        settings,
        team_of=lambda ns: watcher.state.team_of(ns),
        class_priority=lambda: {pc.name: pc.value for pc in watcher.state.priority_classes.values()},
        # The GPU service passes its own (wall-clock) `now`; the statuses are the cluster's, at its time.
        with_statuses=lambda snapshot, names, now=None: watcher.with_statuses(snapshot, names),
    )
    if gpu is not None:
        watcher.consumers.append(_gpu_consumer(gpu))
    alerting = None
    if alert_store is not None and settings.alerting.enabled:
        alerting = AlertingService(
            settings=settings,
            store=alert_store,
            metrics=AlertingMetrics(registry=metrics.registry),
            health=source_health,
            cluster=lambda: watcher.state,
            gpu_alerts=gpu.alerts if gpu is not None else None,
        )
        watcher.consumers.append(alerting.on_snapshot)
    return Container(
        settings=settings,
        clock=clock,
        watcher=watcher,
        metrics=metrics,
        source_name=source_name,
        alerting=alerting,
        alert_store=alert_store if alerting is not None else None,
        gpu=gpu,
        links=dict(links or {}),
    )


def _gpu_consumer(gpu: GpuUsageService) -> Callable[[QueueSnapshot, float], Awaitable[None]]:
    """Return the GPU-usage snapshot consumer.

    Prometheus stamps samples with the wall clock, whatever clock the cluster runs on (a simulator's runs
    faster), so GPU figures are read as of wall-clock now.
    """
    wall = SystemClock()

    async def consume(snapshot: QueueSnapshot, now: float) -> None:
        await gpu.on_snapshot(snapshot, wall.now())

    consume.__qualname__ = "GpuUsageService.on_snapshot"
    return consume


def bind(host: str, port: int) -> socket.socket:
    """Return a listening socket on host:port (0: a free port), so the URL is known before serving."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise typer.BadParameter(f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def open_alert_store(settings: Settings) -> SQLiteAlertStore | None:
    """Open the alert store the settings name (`alerting.store_path`, else `store.path`); None if disabled."""
    if not settings.alerting.enabled:
        return None
    from watchtower.adapters.store_sqlite import SQLiteAlertStore

    return SQLiteAlertStore(settings.alerting.store_path or settings.store.path)


async def serve(
    container: Container,
    source: ClusterSource,
    sock: socket.socket,
    *,
    started: asyncio.Event | None = None,
) -> None:
    """Run the feed, the evaluation tick, alert delivery and the HTTP server until interrupted or cancelled.

    Tasks are cancelled and awaited, the HTTP client is closed on the way out; the alert store belongs to
    whoever opened it. `started` is set once the server accepts connections.
    """
    import httpx
    import uvicorn
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from watchtower.api import deps
    from watchtower.api.app import create_app
    from watchtower.api.routes.alerts import build_router
    from watchtower.services.alerting import DeliveryWorker, build_senders

    log = logging.getLogger("watchtower")
    watcher = container.watcher
    settings = container.settings
    http = httpx.AsyncClient()
    tasks: list[asyncio.Task[None]] = []
    routers = []

    def ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s stopped: %s", task.get_name(), task.exception())

    def spawn(coro: Coroutine[Any, Any, None], name: str) -> None:
        t = asyncio.create_task(coro, name=name)
        t.add_done_callback(ended)
        tasks.append(t)

    if container.alerting is not None and container.alert_store is not None:
        worker = DeliveryWorker(
            store=container.alert_store,
            senders=build_senders(settings.alerting, http=http),
            clock=container.clock,
            cfg=settings.alerting,
            metrics=container.alerting.metrics,
        )
        spawn(container.alerting.run(container.clock, on_enqueued=worker.wake.set), "alert grouping")
        spawn(worker.run(), "notification delivery")
        routers.append(
            build_router(container.alerting, require_token=deps.require_token, clock=container.clock)
        )
    app = create_app(container, routers=routers)
    scheduler = AsyncIOScheduler()
    watcher.schedule(scheduler)
    scheduler.start()
    spawn(source.run(on_list=watcher.on_list, on_change=watcher.on_change), "the cluster feed")
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")
    server = uvicorn.Server(config)

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        if started is not None:
            started.set()

    spawn(announce(), "start-up notice")
    try:
        await server.serve(sockets=[sock])
    finally:
        server.should_exit = True
        scheduler.shutdown(wait=False)
        for t in tasks:
            t.cancel()
        # A part that ignores its cancellation must not keep the process from exiting: wait a while, name
        # it, and go on.
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=SHUTDOWN_GRACE)
            for t in stuck:
                log.warning(
                    "%s did not stop within %g s of shutdown; leaving it", t.get_name(), SHUTDOWN_GRACE
                )
        await http.aclose()
        if container.gpu is not None:
            close = getattr(container.gpu.reader, "close", None)
            if close is not None:
                close()


SHUTDOWN_GRACE = 10.0


def _logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per tick is noise
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per webhook is noise
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # the demo SMTP sink logs every SMTP verb


def _run_service(settings: Settings, *, host: str, port: int) -> None:
    _logging()
    source: ClusterSource
    clock: Clock
    store = open_alert_store(settings)
    try:
        if settings.cluster.source == "sim":
            from watchtower.adapters.sim.cluster import SimulatedCluster

            sim = SimulatedCluster(settings.simulator)
            source, clock = sim, sim  # simulated time drives waits and thresholds
            container = build_container(
                settings, clock=clock, source_health=sim.health, source_name="sim", alert_store=store
            )
        else:
            from watchtower.adapters.kube import KubeSource

            clock = SystemClock()
            # The source needs the watcher's decoder (it trims listed objects to what is kept) and the
            # watcher needs the source's health: bind the health probe late.
            container = build_container(
                settings,
                clock=clock,
                source_health=lambda: source.health(),
                source_name="kube",
                alert_store=store,
            )
            source = KubeSource.connect(
                kubeconfig=settings.cluster.kubeconfig,
                context=settings.cluster.context,
                decoder=container.watcher.decoder,
                page_size=settings.cluster.page_size,
                watch_timeout=settings.cluster.watch_timeout,
                clock=clock,
            )
        sock = bind(host, port)
        actual = sock.getsockname()[1]
        shown = f"[{host}]" if ":" in host else host
        typer.echo(f"Watchtower ({settings.cluster.source}) serving at http://{shown}:{actual}/", err=False)
        sys.stdout.flush()
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(container, source, sock))
    finally:
        if store is not None:
            store.close()


@cli.command()
def run(
    config: Annotated[Path, typer.Option(help="YAML configuration file")],
    port: Annotated[int | None, typer.Option(help="listen port (default: server.port)")] = None,
) -> None:
    """Run the service: watch the cluster (settings.cluster.source), serve the API, /metrics and the page."""
    settings = _settings_or_exit(config)
    _run_service(settings, host=settings.server.host, port=settings.server.port if port is None else port)


@cli.command()
def demo(
    port: Annotated[int, typer.Option(help="listen port on 127.0.0.1 (0: a free one)")] = 0,
    seed: Annotated[int | None, typer.Option(help="simulator seed")] = None,
    prometheus: Annotated[
        bool, typer.Option(help="start a local Prometheus when the binary is installed")
    ] = True,
) -> None:
    """Run the service on a simulated cluster, with local mail and webhook sinks (and Prometheus), and print
    the URLs."""
    from watchtower.demo import DemoOptions, run_demo

    _logging()
    opts = DemoOptions(port=port, seed=seed, prometheus=prometheus)
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(run_demo(opts, echo=_echo))


def _echo(line: str) -> None:
    typer.echo(line)
    sys.stdout.flush()


if __name__ == "__main__":
    cli()
