"""The composition root: settings → adapters → services → the app and the scheduler, started and stopped here.

Nothing else builds an adapter. `build_container` wires the parts; `TickLoop` is the one place that says
in which order a tick's consumers see it; `serve` runs them all until cancelled; `run_service` is what
`watchtower run` does.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from prometheus_client import CollectorRegistry

from watchtower.adapters.clock import SystemClock
from watchtower.adapters.kube.decoder import ObjectDecoder as KubeObjectDecoder
from watchtower.adapters.metrics import WatchtowerMetrics, feed_health_of
from watchtower.api.container import Container
from watchtower.api.documents import DocumentCache
from watchtower.config.model import Settings
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.health import SourceHealth
from watchtower.domain.promql import Queries
from watchtower.domain.tick import Tick
from watchtower.ports import AlertStore, Clock, ClusterSource, FairnessHistory, FairnessMetrics, ObjectDecoder
from watchtower.services.alerting import AlertingMetrics, build_alerting
from watchtower.services.fairness_record import FairnessRecorder
from watchtower.services.fairness_report import ClusterNow, FairnessReports
from watchtower.services.gpu_usage import GpuUsageService
from watchtower.services.watch import Watcher

log = logging.getLogger("watchtower")

SHUTDOWN_GRACE = 10.0
PRUNE_STORE_EVERY = 3600.0  # seconds between prunes of expired silences and delivered outbox rows

TickConsumer = Callable[[Tick], Awaitable[None]]


class StartupError(Exception):
    """The service cannot start for a reason the user fixes (no cluster to reach, ...): one line, no trace."""


def object_decoder(settings: Settings) -> KubeObjectDecoder:
    """Return the decoder that keeps, of each object, what the settings say Watchtower reads."""
    return KubeObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
        gpu_device_classes=frozenset(settings.gpu.device_classes),
    )


def gpu_usage(settings: Settings, watcher: Watcher) -> GpuUsageService | None:
    """Return the GPU-usage service the `prometheus:` section describes, or None without that section."""
    from watchtower.adapters.prometheus import PrometheusReader

    cfg = settings.prometheus
    if cfg is None:
        return None
    state = watcher.state
    return GpuUsageService(
        reader=PrometheusReader(url=cfg.url, timeout=cfg.timeout, retries=cfg.retries, backoff=cfg.backoff),
        queries=Queries(cfg.query_config(settings.teams.label)),
        policy=cfg.idle_policy(),
        tiers=settings.tier_policy(),
        step=cfg.query_step,
        every=cfg.query_every,
        unreachable_failures=cfg.unreachable_failures,
        team_of=state.team_of,
        workload_of=state.workload_of_controller,
        class_priority=lambda: {pc.name: pc.value for pc in state.priority_classes.values()},
        holders_included=True,
    )


def open_alert_store(settings: Settings) -> AlertStore | None:
    """Open the alert store the settings name (`alerting.store_path`, else `store.path`); None if disabled."""
    if not settings.alerting.enabled:
        return None
    from watchtower.adapters.store_sqlite import SQLiteAlertStore

    return SQLiteAlertStore(settings.alerting.store_path or settings.store.path)


def open_history(settings: Settings) -> FairnessHistory | None:
    """Open the fairness history in the alert store's database file; None when `fairness.enabled` is off."""
    if not settings.fairness.enabled:
        return None
    from watchtower.adapters.history_sqlite import SQLiteFairnessHistory

    return SQLiteFairnessHistory(settings.alerting.store_path or settings.store.path)


def fairness_metrics(settings: Settings) -> FairnessMetrics | None:
    """Return the reader of a week's usage from the `prometheus:` section; None without one.

    The Prometheus adapter for the week's figures plugs in here (one place for the service and the CLI)."""
    return None


def fairness_reports(
    settings: Settings, history: FairnessHistory, watcher: Watcher | None = None
) -> FairnessReports:
    """Return the report builder: with the live cluster's entitlement and namespaces when a watcher is
    given (the service), from the store and Prometheus alone when not (the CLI)."""
    cluster = None
    if watcher is not None:
        from watchtower.domain.fairness.inputs import running_lines, team_namespaces

        w = watcher
        cluster = ClusterNow(
            tick=lambda: w.latest,
            namespaces=lambda: team_namespaces(w.state),
            running=lambda: running_lines(w.state, w.policy.tiers),
        )
    return FairnessReports(
        settings=settings, history=history, metrics=fairness_metrics(settings), cluster=cluster
    )


async def report_once(
    settings: Settings, week: IsoWeek | None, *, team: str | None, now: float
) -> FairnessReport:
    """Return one fairness report from the configured store and Prometheus, as `watchtower report` prints
    it (the last complete week when `week` is None).

    Raises StartupError when the store is off or holds no history, UnknownTeam for a team not in the report."""
    from pathlib import Path

    if not settings.fairness.enabled:
        raise StartupError("fairness.enabled is false: no history is recorded")
    path = settings.alerting.store_path or settings.store.path
    if not Path(path).is_file():
        raise StartupError(f"no state store at {path}: run the service (watchtower run) to record history")
    from watchtower.adapters.history_sqlite import SQLiteFairnessHistory

    history = SQLiteFairnessHistory(path)
    reports = fairness_reports(settings, history)
    try:
        return await reports.build(week or reports.default_week(now), now=now, team=team)
    finally:
        history.close()


def fairness_recorder(container: Container) -> FairnessRecorder | None:
    """Return the tick consumer that records the fairness history, when the container has a history."""
    from watchtower.domain.fairness.record import RecordPolicy

    reports = container.fairness
    if reports is None:
        return None
    st = container.watcher.state
    settings = container.settings
    every = settings.queue.evaluate_every
    return FairnessRecorder(
        history=reports.history,
        policy=RecordPolicy(
            tiers=container.watcher.policy.tiers,
            gang_stall_after=settings.alerting.rules.gang_stall_after,
            team_of=st.team_of,
            heartbeat_gap=max(120.0, 2 * every + 60.0),
        ),
        # A workload is still there while it has pods or its controller (a Job, a Kueue-suspended job, a
        # refused ReplicaSet) exists: its wait ended placed; otherwise it was deleted while waiting.
        present=lambda k: k in st.by_workload or st.controller(k) is not None,
        retention_weeks=settings.fairness.retention_weeks,
    )


def build_container(
    settings: Settings,
    *,
    clock: Clock,
    source_health: Callable[[], SourceHealth],
    source_name: str,
    registry: CollectorRegistry | None = None,
    alert_store: AlertStore | None = None,
    links: Mapping[str, str] | None = None,
    decoder: ObjectDecoder | None = None,
    history: FairnessHistory | None = None,
) -> Container:
    """Return the service's parts wired together: metrics on their own registry, the watcher, the GPU-usage
    service (when `settings.prometheus` is set) and alerting (when an `alert_store` is given)."""
    metrics = WatchtowerMetrics(
        registry=registry if registry is not None else CollectorRegistry(),
        tier_bounds=[b for t in settings.tiers for b in (t.warn_after, t.critical_after)],
        feed_health=lambda: feed_health_of(source_health()),
    )
    watcher = Watcher(
        settings=settings,
        clock=clock,
        metrics=metrics,
        decoder=decoder if decoder is not None else object_decoder(settings),
        source_health=source_health,
    )
    alerting = None
    if alert_store is not None and settings.alerting.enabled:
        alerting = build_alerting(
            settings=settings, store=alert_store, metrics=AlertingMetrics(registry=metrics.registry)
        )
    return Container(
        settings=settings,
        clock=clock,
        watcher=watcher,
        metrics=metrics,
        documents=DocumentCache(watcher.policy.tiers),
        source_name=source_name,
        alerting=alerting,
        alert_store=alert_store if alerting is not None else None,
        gpu=gpu_usage(settings, watcher),
        links=dict(links or {}),
        fairness=fairness_reports(settings, history, watcher) if history is not None else None,
    )


class TickLoop:
    """One tick, in the one order its consumers see it: GPU usage reads Prometheus and names the idle
    holders, the watcher evaluates (with those holders' statuses), GPU usage weighs idle GPUs against the
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

    async def tick(self) -> Tick:
        c = self.c
        async with self._ticking:
            gpu = c.gpu
            if gpu is not None:
                await self._step("GpuUsageService.refresh", gpu.refresh_if_due(self.wall.now()))
            now = c.clock.now()
            tick = c.watcher.evaluate(now, holders_of=gpu.idle_holders() if gpu is not None else ())
            c.watcher.prune(now)
            if gpu is not None:
                snap = tick.snapshot_with_holders()
                if await self._step("GpuUsageService.on_snapshot", gpu.on_snapshot(snap, self.wall.now())):
                    tick = tick.with_gpu(tuple(gpu.alerts()))
            if c.alerting is not None:
                await self._step("Alerting.on_tick", c.alerting.on_tick(tick))
            await self._step("DocumentCache.prebuild", c.documents.prebuild(tick))
            for consumer in self.extra:
                name = getattr(consumer, "__qualname__", type(consumer).__name__)
                await self._step(name, consumer(tick))
            return tick

    async def _step(self, name: str, work: Awaitable[object]) -> bool:
        try:
            await work
        except Exception:
            log.exception("tick consumer %s failed", name)
            self.c.watcher.metrics.consumer_failed(name)
            return False
        return True

    def schedule(self, scheduler: Any) -> None:
        """Add the evaluation tick to an APScheduler 3 scheduler that runs on the current event loop."""
        self._loop = asyncio.get_running_loop()
        scheduler.add_job(
            self.tick,
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
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(lambda: loop.create_task(self.tick()))


def bind(host: str, port: int) -> socket.socket:
    """Return a listening socket on host:port (0: a free port), so the URL is known before serving.

    Raises OSError (with the address in its message) when the port cannot be had."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise OSError(e.errno, f"cannot listen on {host}:{port}: {e.strerror}") from None
    sock.listen(128)
    sock.setblocking(False)
    return sock


def served_url(host: str, sock: socket.socket) -> str:
    """Return the base URL a listening socket answers at (no trailing slash); a wildcard host (0.0.0.0,
    ::) is no address to link to, so the machine's name stands for it."""
    if host in ("", "0.0.0.0", "::"):
        host = socket.gethostname()
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{sock.getsockname()[1]}"


def reachable_at(settings: Settings, url: str) -> Settings:
    """Return the settings with `server.external_url` set to `url` unless the configuration set it: alerts
    and pages then link to where the service actually answers, whatever port it was given."""
    if "external_url" in settings.server.model_fields_set:
        return settings
    return settings.model_copy(update={"server": settings.server.model_copy(update={"external_url": url})})


async def serve(
    container: Container,
    source: ClusterSource,
    sock: socket.socket,
    *,
    started: asyncio.Event | None = None,
    side_feeds: Sequence[tuple[str, Callable[[Watcher], Coroutine[Any, Any, None]]]] = (),
) -> None:
    """Run the feed, the evaluation tick, alert delivery and the HTTP server until interrupted or cancelled.

    Tasks are cancelled and awaited, the HTTP client is closed on the way out; the alert store belongs to
    whoever opened it. `started` is set once the server accepts connections.
    """
    import httpx
    import uvicorn
    from apscheduler.schedulers.asyncio import AsyncIOScheduler

    from watchtower.adapters.senders import build_senders
    from watchtower.api import deps
    from watchtower.api.app import create_app
    from watchtower.api.routes.alerts import build_router
    from watchtower.services.alerting import DeliveryWorker

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

    recorder = fairness_recorder(container)
    loop = TickLoop(container, extra=[recorder.on_tick] if recorder is not None else [])
    container.watcher.on_listed = loop.kick
    scheduler = AsyncIOScheduler()
    alerting, store = container.alerting, container.alert_store
    if alerting is not None and store is not None:
        worker = DeliveryWorker(
            store=store,
            senders=build_senders(settings.alerting, http=http),
            clock=container.clock,
            cfg=settings.alerting,
            metrics=alerting.metrics,
        )
        alerting.notifier.on_enqueued = worker.wake.set
        if alerting.pusher is not None:
            alerting.pusher.on_enqueued = worker.wake.set
        spawn(alerting.notifier.run(container.clock), "alert grouping")
        spawn(worker.run(), "notification delivery")
        routers.append(build_router(alerting.admin, require_token=deps.require_token, clock=container.clock))
        scheduler.add_job(
            _prune_store, "interval", seconds=PRUNE_STORE_EVERY, args=(store, settings, container.clock)
        )
    app = create_app(container, routers=routers)
    loop.schedule(scheduler)
    scheduler.start()
    w = container.watcher
    spawn(source.run(on_list=w.on_list, on_change=w.on_change), "the cluster feed")
    for name, feed in side_feeds:
        spawn(feed(w), name)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off"))

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
            container.gpu.reader.close()


def _prune_store(store: AlertStore, settings: Settings, clock: Clock) -> None:
    r = settings.alerting.retention
    removed = store.prune(clock.now(), silence_retention=r.silences, delivered_retention=r.delivered)
    log.info("alert store pruned: %s", removed)


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per tick is noise
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per webhook is noise
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # the demo SMTP sink logs every SMTP verb


def run_service(settings: Settings, *, host: str, port: int, echo: Callable[[str], object]) -> None:
    """Run `watchtower run`: the cluster the settings name (or the simulator) until interrupted.

    Raises StartupError when there is no cluster to watch, OSError when the port cannot be had.
    """
    import contextlib

    configure_logging()
    source: ClusterSource
    clock: Clock
    health: Callable[[], SourceHealth]
    side_feeds: list[tuple[str, Callable[[Watcher], Coroutine[Any, Any, None]]]] = []
    decoder = object_decoder(settings)
    if settings.cluster.source == "sim":
        from watchtower.adapters.sim.cluster import SimulatedCluster

        sim = SimulatedCluster(settings.simulator)
        # Simulated time drives waits and thresholds.
        source, clock, health = sim, sim, sim.feed_health
    else:
        from watchtower.adapters.kube import KubeConfigError, KubeSource

        clock = SystemClock()
        try:
            kube = KubeSource.connect(
                kubeconfig=settings.cluster.kubeconfig,
                context=settings.cluster.context,
                decoder=decoder,
                page_size=settings.cluster.page_size,
                watch_timeout=settings.cluster.watch_timeout,
                stale_limit=settings.cluster.stale_after,
                clock=clock,
            )
        except KubeConfigError as e:
            raise StartupError(str(e)) from None
        source, health = kube, kube.feed_health
        from watchtower.adapters.kube.visibility import KueueVisibility

        visibility = KueueVisibility(kube.transport, decoder, clock=clock)
        side_feeds.append(
            (
                "Kueue queue positions",
                lambda w: visibility.run(queues=w.kueue_waiting_queues, on_positions=w.on_kueue_positions),
            )
        )
    # Bound before anything is built: the links in alerts and on the pages use the port actually had.
    sock = bind(host, port)
    url = served_url(host, sock)
    settings = reachable_at(settings, url)
    # Opened once the cluster is known to be reachable in principle: a failed start leaves no database.
    store = open_alert_store(settings)
    history = open_history(settings)
    try:
        container = build_container(
            settings,
            clock=clock,
            source_health=health,
            source_name=settings.cluster.source,
            alert_store=store,
            decoder=decoder,
            history=history,
        )
        echo(f"Watchtower ({settings.cluster.source}) serving at {url}/")
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(container, source, sock, side_feeds=side_feeds))
    finally:
        sock.close()
        if store is not None:
            store.close()
        if history is not None:
            history.close()
