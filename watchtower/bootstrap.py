"""The composition root: settings → adapters → services → the app and the scheduler, started and stopped here.

Nothing else builds an adapter. `build_container` wires the parts; `TickLoop` is the one place that says
in which order a tick's consumers see it; `serve` runs them all until cancelled; `run_service` is what
`watchtower run` does. Leader election (`leader_election`) decides which replica runs the leader-only
jobs (`leader_jobs`); SIGTERM and SIGINT stop the service in order (`Stopping`, the end of `serve`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import socket
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

from prometheus_client import CollectorRegistry

from watchtower.adapters.clock import SystemClock
from watchtower.adapters.kube.decoder import ObjectDecoder as KubeObjectDecoder
from watchtower.adapters.metrics import WatchtowerMetrics, feed_health_of
from watchtower.adapters.process_runtime import limit_malloc_arenas, loop_factory
from watchtower.adapters.scheduled_jobs import ScheduledJobs
from watchtower.api.container import Container
from watchtower.api.documents import DocumentCache
from watchtower.config.alerting import AlertingConfig
from watchtower.config.fairness import FairnessConfig
from watchtower.config.model import Settings
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.health import SourceHealth
from watchtower.domain.promql import FairnessQueries, OwnQueries, Queries
from watchtower.domain.tick import Tick
from watchtower.ports import (
    AlertStore,
    Clock,
    ClusterSource,
    FairnessHistory,
    FairnessMetrics,
    Fence,
    ObjectDecoder,
    ReportOutbox,
    ReportPresenter,
    ReportSource,
    Sender,
)
from watchtower.services.alerting import AlertingMetrics, DeliveryWorker, build_alerting
from watchtower.services.config_reload import ConfigReloader
from watchtower.services.fairness_record import FairnessRecorder
from watchtower.services.fairness_report import ClusterNow, FairnessReports
from watchtower.services.fairness_send import (
    REPORT_INTEGRATION,
    FairnessMailer,
    FairnessSendMetrics,
    SendOutcome,
)
from watchtower.services.gpu_usage import GpuUsageService
from watchtower.services.leadership import LeaderElector, LeaderMetrics, SoleLeader, replica_identity
from watchtower.services.watch import Watcher

log = logging.getLogger("watchtower")

SHUTDOWN_GRACE = 10.0
RELEASE_TIMEOUT = 3.0  # seconds the Lease's release may take on the way out; it expires by itself anyway
PRUNE_STORE_EVERY = 3600.0  # seconds between prunes of expired silences and delivered outbox rows
STORE_RETRY_PAUSE = 5.0  # seconds before delivery starts again after its store failed

TickConsumer = Callable[[Tick], Awaitable[None]]
Job = Callable[[], Coroutine[Any, Any, None]]


class StartupError(Exception):
    """The service cannot start for a reason the user fixes (no cluster to reach, ...): one line, no trace."""


def object_decoder(settings: Settings) -> KubeObjectDecoder:
    """Return the decoder that keeps, of each object, what the settings say Watchtower reads."""
    return KubeObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
        gpu_device_classes=frozenset(settings.gpu.device_classes),
        kueue_gpu_resources=frozenset(settings.gpu.kueue_resources),
        report_annotation=settings.fairness.recipients_annotation,
    )


def gpu_usage(settings: Settings, watcher: Watcher) -> GpuUsageService | None:
    """Return the GPU-usage service the `prometheus:` section describes, or None without that section."""
    from watchtower.adapters.prometheus.reader import PrometheusReader

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


def fairness_metrics(settings: Settings) -> FairnessMetrics | None:
    """Return the fairness report's Prometheus reader (the week's usage), or None without a `prometheus:`
    section. Watchtower's own series are read with `artefacts.job_selector`, as the generated rules do."""
    from watchtower.adapters.prometheus.fairness import PrometheusFairness
    from watchtower.adapters.prometheus.reader import PrometheusReader

    cfg = settings.prometheus
    if cfg is None:
        return None
    # The week's subqueries take longer than the tick's instant queries: a few timeouts' worth.
    reader = PrometheusReader(
        url=cfg.url, timeout=max(60.0, cfg.timeout), retries=cfg.retries, backoff=cfg.backoff
    )
    return PrometheusFairness(reader, fairness_queries(settings), idle_threshold=cfg.idle_threshold)


def fairness_queries(settings: Settings) -> FairnessQueries:
    """Return the fairness report's queries as the settings configure them (labels, selectors)."""
    cfg = settings.prometheus
    config = cfg.query_config(settings.teams.label) if cfg is not None else None
    return FairnessQueries(Queries(config), OwnQueries(settings.artefacts.job_selector))


def open_alert_store(settings: Settings) -> AlertStore | None:
    """Open the alert store the settings name (`store.url`, else the SQLite file `alerting.store_path`
    or `store.path`), migrated to this version's schema; None if alerting is disabled.

    Raises StartupError for a URL naming no usable database, one that cannot be reached, or a schema
    newer than this version knows; the message shows the URL with its password masked."""
    if not settings.alerting.enabled:
        return None
    from watchtower.adapters.store.migrations import StoreVersionError
    from watchtower.adapters.store.sqlite import SQLiteAlertStore
    from watchtower.adapters.store.url import StoreUrlError, store_target

    cfg = settings.store
    try:
        target = store_target(cfg.url) if cfg.url else None
        if target is not None and target.kind == "postgresql":
            from watchtower.adapters.store.postgres import PostgresAlertStore, StoreConnectError

            password = cfg.password.get_secret_value() if cfg.password is not None else None
            try:
                store: AlertStore = PostgresAlertStore(
                    target.location, password=password, claim_for=cfg.claim_for
                )
            except StoreConnectError as e:
                raise StartupError(str(e)) from None
            log.info("alert store: PostgreSQL at %s", target.shown)
            return store
        return SQLiteAlertStore(target.location if target else settings.alerting.store_path or cfg.path)
    except (StoreUrlError, StoreVersionError) as e:
        raise StartupError(str(e)) from None


def open_history(
    settings: Settings, store: AlertStore | None = None, *, sync_each_commit: bool = True
) -> FairnessHistory | None:
    """Open the fairness history in the state store's database (migration 4 of either store); None when
    `fairness.enabled` is off. On PostgreSQL it shares `store`'s connection (a store of its own is opened
    when alerting is off); on SQLite it has its own connection to the same file, which with
    `sync_each_commit` False does not wait for the disk at each commit (SQLiteFairnessHistory).

    Raises StartupError as open_alert_store does."""
    if not settings.fairness.enabled:
        return None
    from watchtower.adapters.store.migrations import StoreVersionError
    from watchtower.adapters.store.url import StoreUrlError, store_target

    cfg = settings.store
    try:
        target = store_target(cfg.url) if cfg.url else None
        if target is not None and target.kind == "postgresql":
            from watchtower.adapters.history.postgres import PostgresFairnessHistory
            from watchtower.adapters.store.postgres import PostgresAlertStore, StoreConnectError

            if isinstance(store, PostgresAlertStore):
                return PostgresFairnessHistory(store.transaction)
            password = cfg.password.get_secret_value() if cfg.password is not None else None
            try:
                own = PostgresAlertStore(target.location, password=password, claim_for=cfg.claim_for)
            except StoreConnectError as e:
                raise StartupError(str(e)) from None
            return PostgresFairnessHistory(own.transaction, on_close=own.close)
        from watchtower.adapters.history.sqlite import SQLiteFairnessHistory

        return SQLiteFairnessHistory(_sqlite_path(settings), sync_each_commit=sync_each_commit)
    except (StoreUrlError, StoreVersionError) as e:
        raise StartupError(str(e)) from None


def _on_postgres(settings: Settings) -> bool:
    from watchtower.adapters.store.url import StoreUrlError, store_target

    try:
        return bool(settings.store.url) and store_target(settings.store.url).kind == "postgresql"
    except StoreUrlError as e:
        raise StartupError(str(e)) from None


def _sqlite_path(settings: Settings) -> str:
    from watchtower.adapters.store.url import store_target

    if settings.store.url:
        return store_target(settings.store.url).location
    return settings.alerting.store_path or settings.store.path


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


def reports_source(reports: FairnessReports, clock: Clock) -> ReportSource:
    """Return the report service as a ReportSource: `week`'s report as of the clock's now."""

    def source(week: IsoWeek, team: str | None, /) -> Awaitable[FairnessReport]:
        return reports.build(week, now=clock.now(), team=team)

    return source


class _Fixed:
    def __init__(self, at: float) -> None:
        self.at = at

    def now(self) -> float:
        return self.at


def report_source_for(settings: Settings, *, clock: Clock | None = None) -> ReportSource | None:
    """Return the report service for the command line, which watches no cluster: each report is built from
    the configured store's history and Prometheus, the store opened for it and closed after. None when
    `fairness.enabled` is off.

    The source raises StartupError when there is no store to read (a SQLite file is never created by
    looking), UnknownTeam for a team not in the report."""
    if not settings.fairness.enabled:
        return None
    at = clock or SystemClock()

    async def source(week: IsoWeek, team: str | None, /) -> FairnessReport:
        if not _on_postgres(settings):
            from pathlib import Path

            path = _sqlite_path(settings)
            if not Path(path).is_file():
                raise StartupError(
                    f"no state store at {path}: run the service (watchtower run) to record history"
                )
        history = open_history(settings)
        assert history is not None  # fairness.enabled was checked above
        try:
            return await fairness_reports(settings, history).build(week, now=at.now(), team=team)
        finally:
            history.close()

    return source


async def report_once(
    settings: Settings, week: IsoWeek | None, *, team: str | None, now: float
) -> FairnessReport:
    """Return one fairness report from the configured store and Prometheus, as `watchtower report` prints
    it (the last complete week when `week` is None).

    Raises StartupError when fairness is off or there is no store, UnknownTeam for a team not in the report."""
    source = report_source_for(settings, clock=_Fixed(now))
    if source is None:
        raise StartupError("fairness.enabled is false: no history is recorded")
    from watchtower.services.fairness_send import fetch_report, last_complete_week

    return await fetch_report(source, week or last_complete_week(now, settings.fairness.timezone), team)


def fairness_recorder(container: Container, *, start_empty: bool = False) -> FairnessRecorder | None:
    """Return the tick consumer that records the fairness history, when the container has a history
    (`start_empty`: not from the store's open waits, for a cluster other than the one the store follows)."""
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
        start_empty=start_empty,
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
    report_source: ReportSource | None = None,
    leadership: Fence | None = None,
    history: FairnessHistory | None = None,
) -> Container:
    """Return the service's parts wired together: metrics on their own registry, the watcher, the GPU-usage
    service (when `settings.prometheus` is set), alerting (when an `alert_store` is given), the weekly
    report's page (when a `report_source` is given and `fairness.enabled`) and who leads (`leadership`: a
    LeaderElector, else this process alone)."""
    metrics = WatchtowerMetrics(
        registry=registry if registry is not None else CollectorRegistry(),
        tier_bounds=[b for t in settings.tiers for b in (t.warn_after, t.critical_after)],
        feed_health=lambda: feed_health_of(source_health()),
    )
    leader_metrics = LeaderMetrics(registry=metrics.registry)
    if isinstance(leadership, LeaderElector):
        leadership.metrics = leader_metrics
    else:
        leadership = leadership or SoleLeader()
        leader_metrics.leader.set(1)
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
    reports = None
    if history is not None and settings.fairness.enabled:
        reports = fairness_reports(settings, history, watcher)
        # The page and the weekly email read the same service as the JSON: the report as of the clock's now.
        report_source = report_source or reports_source(reports, clock)
    if not settings.fairness.enabled:
        report_source = None
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
        report_source=report_source,
        report_presenter=report_presenter() if report_source is not None else None,
        leadership=leadership,
        fairness=reports,
    )


def report_presenter() -> ReportPresenter:
    """Return the presenter of the weekly report (HTML, text, CSV, charts); imports matplotlib."""
    from watchtower.adapters.report.presenter import FairnessPresenter

    return FairnessPresenter()


def fairness_mailer(
    container: Container, outbox: ReportOutbox, *, wake: Callable[[], None] | None = None
) -> FairnessMailer | None:
    """Return what enqueues the weekly report emails, or None without a report source."""
    source, presenter = container.report_source, container.report_presenter
    if source is None or presenter is None:
        return None
    settings = container.settings
    base = settings.server.external_url.rstrip("/") if settings.server.external_url else ""
    state = container.watcher.state
    registry = getattr(container.metrics, "registry", None)  # WatchtowerMetrics': the one /metrics serves
    return FairnessMailer(
        source=source,
        presenter=presenter,
        outbox=outbox,
        clock=container.clock,
        cfg=settings.fairness,
        namespaces=lambda: state.namespaces,
        page_url=(lambda week: f"{base}/reports/fairness/{week}") if base else None,
        metrics=FairnessSendMetrics(registry=registry) if registry is not None else None,
        on_enqueued=wake,
    )


def last_fire_time(cfg: FairnessConfig, now: float) -> datetime:
    """Return the latest scheduled send time (`schedule_day` at `schedule_time`, in `timezone`) at or before
    `now`."""
    tz = ZoneInfo(cfg.timezone)
    local = datetime.fromtimestamp(now, tz)
    hh, mm = (int(x) for x in cfg.schedule_time.split(":"))
    day = WEEKDAYS.index(cfg.schedule_day)
    for back in range(8):
        d = local.date() - timedelta(days=back)
        at = datetime(d.year, d.month, d.day, hh, mm, tzinfo=tz)
        if d.weekday() == day and at <= local:
            return at
    raise AssertionError("a weekday recurs within 8 days")


WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
FAIRNESS_JOB = "watchtower-fairness-report"
FAIRNESS_RETRY = 900.0  # seconds between tries of a send whose report could not be made


def schedule_fairness(
    scheduler: Any, mailer: FairnessMailer, cfg: FairnessConfig, *, now: float, fence: Fence | None = None
) -> None:
    """Add the weekly report to an APScheduler 3 scheduler: a cron job on `schedule_day`/`schedule_time` in
    `timezone`, coalesced, with `misfire_grace`. A start within the grace after a missed send runs it at
    once (an in-memory job store forgets missed runs); the send keys make every extra run enqueue nothing."""
    from apscheduler.triggers.cron import CronTrigger

    hh, mm = cfg.schedule_time.split(":")
    tz = ZoneInfo(cfg.timezone)
    trigger = CronTrigger(day_of_week=cfg.schedule_day, hour=int(hh), minute=int(mm), timezone=tz)
    missed = last_fire_time(cfg, now)
    late = now - missed.timestamp() <= cfg.misfire_grace

    async def send() -> None:
        if fence is not None and fence.term() is None:
            # Every replica schedules the job; only the Lease holder sends (DESIGN §2). The sent-once keys
            # in the shared store keep a leader change around the hour from sending twice.
            log.info("the weekly fairness report is the leader's to send; this replica does not lead")
            return
        try:
            await mailer.send_week()
        except Exception:
            # Prometheus down, the store busy...: nothing was recorded; try again while still in the grace.
            log.exception("the weekly fairness report could not be enqueued")
            due = datetime.now(tz) + timedelta(seconds=FAIRNESS_RETRY)
            if (due - last_fire_time(cfg, due.timestamp())).total_seconds() <= cfg.misfire_grace:
                scheduler.add_job(
                    send, "date", run_date=due, id=FAIRNESS_JOB + "-retry", replace_existing=True
                )

    scheduler.add_job(
        send,
        trigger,
        id=FAIRNESS_JOB,
        misfire_grace_time=int(cfg.misfire_grace),
        coalesce=True,
        max_instances=1,
        replace_existing=True,
        **({"next_run_time": datetime.now(tz)} if late else {}),
    )


def leader_jobs(container: Container, worker: DeliveryWorker | None) -> list[tuple[str, Job]]:
    """Return, by name, the jobs only the leader runs: started when this replica starts leading, cancelled
    the moment it stops. The alert evaluation and the push into Alertmanager run in the tick, which asks
    the same fence (`TickLoop.tick`); the weekly report's job asks it too (`schedule_fairness`). The
    fairness recorder is no leader job: every replica records (idempotent upserts)."""
    alerting = container.alerting
    if alerting is None or worker is None:
        return []
    notifier, clock = alerting.notifier, container.clock
    # A store that went away for a while (PostgreSQL restarting) must not stop grouping or delivery until
    # the next restart: each starts again after a pause.
    return [
        ("alert grouping", lambda: again_after_failure(lambda: notifier.run(clock), "alert grouping")),
        (DELIVERY, lambda: again_after_failure(worker.run, DELIVERY)),
    ]


DELIVERY = "notification delivery"


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
        self.stopped = False  # shutting down: no kicks any more

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

    async def _step(self, name: str, work: Awaitable[object]) -> bool:
        try:
            await work
        except Exception:
            log.exception("tick consumer %s failed", name)
            self.c.watcher.metrics.consumer_failed(name)
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


class Stopping:
    """SIGTERM and SIGINT, handled on the loop: the first asks for an orderly stop, a second for a quick one."""

    SIGNALS = (signal.SIGTERM, signal.SIGINT)

    def __init__(self) -> None:
        self.requested = asyncio.Event()
        self.hurry = asyncio.Event()
        self._before: dict[int, Any] = {}

    def install(self) -> None:
        loop = asyncio.get_running_loop()
        for sig in self.SIGNALS:
            self._before[sig] = signal.getsignal(sig)
            loop.add_signal_handler(sig, self._on_signal, sig)

    def remove(self) -> None:
        loop = asyncio.get_running_loop()
        for sig, before in self._before.items():
            loop.remove_signal_handler(sig)
            signal.signal(sig, before)  # whatever the CLI had set (SIGTERM as Ctrl-C) for what follows
        self._before.clear()

    def _on_signal(self, sig: int) -> None:
        name = signal.Signals(sig).name
        if self.requested.is_set():
            log.warning("%s again: stopping without waiting for notifications under way", name)
            self.hurry.set()
        else:
            log.info("%s: stopping", name)
            self.requested.set()


async def serve(
    container: Container,
    source: ClusterSource,
    sock: socket.socket,
    *,
    started: asyncio.Event | None = None,
    side_feeds: Sequence[tuple[str, Callable[[Watcher], Coroutine[Any, Any, None]]]] = (),
    config_path: str | Path | None = None,
    handle_signals: bool = False,
) -> None:
    """Run the feed, the evaluation tick, the leader election (when on), the leader's jobs and the HTTP
    server until SIGTERM/SIGINT (with `handle_signals`) or cancellation; with `config_path`, reload that
    file when it changes (`server.config_reload_every`).

    The way out, in order: no new work (no tick, no grouping, no new send); the sends under way get
    `server.shutdown_deadline` (none when cancelled) and what is left stays due in the outbox; the Lease is
    released, so a follower takes over at once; the HTTP server and the rest stop. The alert store belongs
    to whoever opened it. `started` is set once the server accepts connections.
    """
    import httpx
    import uvicorn

    from watchtower.adapters.senders import build_report_sender, build_senders
    from watchtower.api import deps
    from watchtower.api.app import create_app
    from watchtower.api.routes.alerts import build_router

    class Server(uvicorn.Server):
        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # The signals are the composition root's (`Stopping`): uvicorn's own handling would stop the
            # server first and re-raise them afterwards, racing the orderly way out.
            yield

    settings = container.settings
    fence = container.leadership
    elector = fence if isinstance(fence, LeaderElector) else None
    http = httpx.AsyncClient()
    tasks: list[asyncio.Task[None]] = []
    leading: dict[str, asyncio.Task[None]] = {}
    routers = []

    def ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("%s stopped: %s", task.get_name(), task.exception())

    def spawn(coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]:
        t = asyncio.create_task(coro, name=name)
        t.add_done_callback(ended)
        tasks.append(t)
        return t

    recorder = fairness_recorder(container)
    loop = TickLoop(container, extra=[recorder.on_tick] if recorder is not None else [])
    container.watcher.on_listed = loop.kick
    scheduler = ScheduledJobs()
    alerting, store = container.alerting, container.alert_store
    worker = None
    report_sender = None
    if alerting is not None and store is not None:
        senders = build_senders(settings.alerting, http=http)
        fairness = settings.fairness
        report_sender = (
            build_report_sender(settings.alerting, receiver=fairness.smtp_receiver, http=http)
            if fairness.send
            else None
        )
        if report_sender is not None:
            senders[REPORT_INTEGRATION] = report_sender
        worker = DeliveryWorker(
            store=store,
            senders=senders,
            clock=container.clock,
            cfg=settings.alerting,
            metrics=alerting.metrics,
            fence=fence,
        )
        alerting.notifier.on_enqueued = worker.wake.set
        if alerting.pusher is not None:
            alerting.pusher.on_enqueued = worker.wake.set
        routers.append(build_router(alerting.admin, require_token=deps.require_token, clock=container.clock))
        scheduler.add_job(
            _prune_store, "interval", seconds=PRUNE_STORE_EVERY, args=(store, settings, container.clock)
        )
        # The weekly report is sent where alerts are delivered: in HA by the Lease holder only (DESIGN §2).
        if fairness.send:
            mailer = fairness_mailer(container, store, wake=worker.wake.set)
            if mailer is None or report_sender is None:
                log.warning(
                    "fairness.send is on but %s: no weekly report will be emailed",
                    "no email receiver has SMTP settings"
                    if report_sender is None
                    else "there is no report source",
                )
            else:
                schedule_fairness(scheduler, mailer, fairness, now=time.time(), fence=fence)
    if config_path is not None and settings.server.config_reload_every > 0:
        reloader = config_reloader(
            container,
            config_path,
            worker=worker,
            # A reload keeps the weekly report's sender beside the alert senders it rebuilds.
            senders=lambda cfg: {
                **build_senders(cfg, http=http),
                **({REPORT_INTEGRATION: report_sender} if report_sender is not None else {}),
            },
        )
        spawn(reloader.run(settings.server.config_reload_every), "configuration reload")
    jobs = leader_jobs(container, worker)

    def lead(now_leading: bool) -> None:
        for t in leading.values():
            t.cancel()
        leading.clear()
        if not now_leading or loop.stopped:
            return
        if elector is not None and alerting is not None:
            alerting.lead()  # another replica may have led: start from what the store holds
        for name, job in jobs:
            leading[name] = spawn(job(), name)

    stopping = Stopping() if handle_signals else None
    if stopping is not None:
        stopping.install()
    app = create_app(container, routers=routers)
    loop.schedule(scheduler)
    scheduler.start()
    w = container.watcher
    spawn(source.run(on_list=w.on_list, on_change=w.on_change), "the cluster feed")
    for name, feed in side_feeds:
        spawn(feed(w), name)
    election = None
    if elector is not None:
        elector.on_change = lead
        election = spawn(elector.run(), "leader election")
    else:
        lead(True)
    server = Server(
        uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=2
        )
    )

    async def announce() -> None:
        while not server.started:
            await asyncio.sleep(0.02)
        if started is not None:
            started.set()

    spawn(announce(), "start-up notice")
    serving = asyncio.create_task(server.serve(sockets=[sock]), name="the HTTP server")
    asked = asyncio.create_task(stopping.requested.wait()) if stopping is not None else None
    graceful = False
    try:
        await asyncio.wait(
            [t for t in (serving, asked) if t is not None], return_when=asyncio.FIRST_COMPLETED
        )
        graceful = True
    finally:
        if asked is not None:
            asked.cancel()
        loop.stopped = True
        await scheduler.stop()
        for name, t in leading.items():
            if name != DELIVERY:
                t.cancel()
        delivering = leading.get(DELIVERY)
        if worker is not None and delivering is not None:
            deadline = settings.server.shutdown_deadline if graceful else 0.0
            await _finish_sends(
                worker, delivering, deadline, stopping.hurry if stopping is not None else None
            )
        if election is not None and elector is not None:
            election.cancel()
            await asyncio.wait([election], timeout=RELEASE_TIMEOUT)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(elector.release(), timeout=RELEASE_TIMEOUT)
        server.should_exit = True
        await asyncio.wait([serving], timeout=SHUTDOWN_GRACE)
        tasks.append(serving)
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
        if elector is not None:
            elector.close()
        if container.gpu is not None:
            container.gpu.reader.close()
        if stopping is not None:
            stopping.remove()
    if serving.done() and not serving.cancelled() and (e := serving.exception()) is not None:
        raise e


async def _finish_sends(
    worker: DeliveryWorker, task: asyncio.Task[None], deadline: float, hurry: asyncio.Event | None
) -> None:
    """Let the sends under way finish within `deadline` (or until `hurry`); cut the rest short, which
    leaves them due in the outbox for whoever leads next, under the same idempotency keys."""
    worker.stop()
    waits: list[asyncio.Future[Any]] = [task]
    hurried = asyncio.ensure_future(hurry.wait()) if hurry is not None else None
    if hurried is not None:
        waits.append(hurried)
    if deadline > 0 and not task.done():
        await asyncio.wait(waits, timeout=deadline, return_when=asyncio.FIRST_COMPLETED)
    if hurried is not None:
        hurried.cancel()
    if not task.done():
        if worker.sending:
            log.warning(
                "%d notification(s) still being sent at shutdown: left in the outbox for the next leader",
                worker.sending,
            )
        task.cancel()
        await asyncio.wait([task], timeout=SHUTDOWN_GRACE)


def config_reloader(
    container: Container,
    path: str | Path,
    *,
    worker: DeliveryWorker | None = None,
    senders: Callable[[AlertingConfig], Mapping[str, Sender]] | None = None,
) -> ConfigReloader:
    """Return the poller of the configuration file at `path`, wired to the running parts: a valid change
    goes to alerting and the delivery worker (new senders) on the event loop; a bad one raises
    WatchtowerConfigInvalid and sets `watchtower_config_valid` to 0. Call on the running event loop."""
    loop = asyncio.get_running_loop()
    alerting = container.alerting
    url = container.settings.server.external_url

    async def take(new: Settings) -> None:
        if alerting is not None:
            await alerting.reconfigure(new, worker=worker)
        if worker is not None and senders is not None:
            worker.senders = senders(new.alerting)

    def apply(new: Settings, _changes: object) -> None:
        # Polled off the loop; the running parts are changed on it, between evaluations.
        asyncio.run_coroutine_threadsafe(take(new), loop).result(timeout=60)

    metrics = container.metrics
    return ConfigReloader(
        path=path,
        running=container.settings,
        apply=apply,
        on_problems=alerting.config_invalid if alerting is not None else (lambda _p: None),
        metrics=metrics if isinstance(metrics, WatchtowerMetrics) else None,
        prepare=lambda s: reachable_at(s, url),
    )


async def again_after_failure(
    run: Callable[[], Awaitable[None]], name: str, *, pause: float = STORE_RETRY_PAUSE
) -> None:
    """Run `run` until it returns, starting it again `pause` seconds after each failure: a database that
    went away for a while must not stop delivery until the next restart."""
    while True:
        try:
            await run()
            return
        except Exception as e:
            log.error("%s failed (%s); starting it again in %g s", name, e, pause)
            await asyncio.sleep(pause)


def _prune_store(store: AlertStore, settings: Settings, clock: Clock) -> None:
    r = settings.alerting.retention
    removed = store.prune(clock.now(), silence_retention=r.silences, delivered_retention=r.delivered)
    # A week's send keys are kept as long as its history: no report of a kept week is sent twice.
    store.prune_keys(clock.now() - settings.fairness.retention_weeks * 7 * 86400.0)
    log.info("alert store pruned: %s", removed)


def configure_logging() -> None:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("apscheduler").setLevel(logging.WARNING)  # one line per tick is noise
    logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per webhook is noise
    logging.getLogger("mail.log").setLevel(logging.WARNING)  # the demo SMTP sink logs every SMTP verb


def leader_elector(settings: Settings, client: Any) -> LeaderElector:
    """Return the election on the Lease `leader_election` names, through the Kubernetes API `client`.

    Raises StartupError when no namespace is set and this is not a pod (no service-account namespace)."""
    from watchtower.adapters.kube.lease import LeaseClient, pod_name, pod_namespace

    cfg = settings.leader_election
    namespace = cfg.lease_namespace or pod_namespace()
    if not namespace:
        raise StartupError(
            "leader_election.lease_namespace is not set and this is not a pod (no service-account "
            "namespace file): set it"
        )
    timings = cfg.timings()
    lease = LeaseClient(
        client, name=cfg.lease_name, namespace=namespace, timeout=min(5.0, timings.renew_deadline / 2)
    )
    return LeaderElector(
        api=lease, identity=replica_identity(pod_name()), timings=timings, clock=SystemClock()
    )


def run_service(
    settings: Settings,
    *,
    host: str,
    port: int,
    echo: Callable[[str], object],
    config_path: str | Path | None = None,
) -> None:
    """Run `watchtower run`: the cluster the settings name (or the simulator) until interrupted.

    Raises StartupError when there is no cluster to watch, OSError when the port cannot be had.
    """
    configure_logging()
    limit_malloc_arenas()  # before any thread starts: a thread's arena is made at its first malloc
    source: ClusterSource
    clock: Clock
    health: Callable[[], SourceHealth]
    leadership: Fence | None = None
    side_feeds: list[tuple[str, Callable[[Watcher], Coroutine[Any, Any, None]]]] = []
    decoder = object_decoder(settings)
    if settings.leader_election.enabled and settings.cluster.source != "kube":
        raise StartupError("leader_election needs cluster.source kube: the Lease lives on the API server")
    if settings.cluster.source == "sim":
        from watchtower.simulator.cluster import SimulatedCluster

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
        if settings.leader_election.enabled:
            leadership = leader_elector(settings, kube.transport.client)
    # Bound before anything is built: the links in alerts and on the pages use the port actually had.
    sock = bind(host, port)
    url = served_url(host, sock)
    settings = reachable_at(settings, url)
    # Opened once the cluster is known to be reachable in principle: a failed start leaves no database.
    store = open_alert_store(settings)
    history = None
    try:
        history = open_history(settings, store)
        container = build_container(
            settings,
            clock=clock,
            source_health=health,
            source_name=settings.cluster.source,
            alert_store=store,
            decoder=decoder,
            leadership=leadership,
            history=history,
        )
        echo(f"Watchtower ({settings.cluster.source}) serving at {url}/")
        if settings.server.api_token is None:
            # The install's Secret is optional: say at start why a silence cannot be created, not only on
            # the first refused request.
            log.warning(
                "changes through the API (silences) are disabled: no server.api_token is configured"
                " (WATCHTOWER_SERVER__API_TOKEN or server.api_token_file)"
            )
        # A signal before serve() takes the signals over ends the start like Ctrl-C.
        with contextlib.suppress(KeyboardInterrupt), asyncio.Runner(loop_factory=loop_factory()) as runner:
            runner.run(
                serve(
                    container,
                    source,
                    sock,
                    side_feeds=side_feeds,
                    config_path=config_path,
                    handle_signals=True,
                )
            )
    finally:
        sock.close()
        if history is not None:
            history.close()
        if store is not None:
            store.close()


# ---- the weekly report from the command line (`watchtower report fairness`) ------------------------------


def render_report(report: FairnessReport, fmt: str, *, team: str | None = None) -> str:
    """Return the report as `fmt` (json, csv, html with the charts inline, text); ValueError naming the
    formats for another."""
    from watchtower.api.fairness.formats import render

    body, _ = render(report, fmt, presenter=report_presenter(), team=team)
    return body.decode()


async def send_reports(
    settings: Settings,
    source: ReportSource,
    week: IsoWeek,
    *,
    clock: Clock | None = None,
    deliver_for: float = 120.0,
) -> tuple[SendOutcome, dict[str, int]]:
    """Enqueue `week`'s report emails (`--send`): each recipient not yet sent it, through the state store's
    outbox, then deliver the reports' messages for up to `deliver_for` seconds (0: leave them to the running
    service). Return the outcome and the week's report messages by status; what is still pending is
    delivered by the service on the same store (or the next `--send`).

    Raises StartupError without an email receiver or a state store."""
    import httpx

    from watchtower.adapters.senders import build_report_sender
    from watchtower.services.alerting import DeliveryWorker

    clock = clock or SystemClock()
    store = open_alert_store(settings)
    if store is None:
        raise StartupError("sending reports needs the state store: alerting.enabled is off")
    try:
        async with httpx.AsyncClient() as http:
            sender = build_report_sender(
                settings.alerting, receiver=settings.fairness.smtp_receiver, http=http
            )
            if sender is None:
                raise StartupError(
                    "no email receiver in alerting.receivers has the SMTP settings to send with"
                )
            container = build_container(
                settings,
                clock=clock,
                source_health=SourceHealth,  # no cluster is watched: namespaces' annotations are not read
                source_name="cli",
                alert_store=store,
                report_source=source,
            )
            mailer = fairness_mailer(container, store)
            if mailer is None:
                raise StartupError("fairness.enabled is off")
            outcome = await mailer.send_week(week)
            worker = DeliveryWorker(
                store=_ReportsOnly(store),
                senders={REPORT_INTEGRATION: sender},
                clock=clock,
                cfg=settings.alerting,
            )
            deadline = time.monotonic() + deliver_for
            while time.monotonic() < deadline and _pending_reports(store, str(week)):
                await worker.drain()
                await asyncio.sleep(0.2)
            return outcome, _report_statuses(store, str(week))
    finally:
        store.close()


class _ReportsOnly:
    """The store as the CLI's delivery sees it: only the reports' messages are due, so the alert
    notifications in the same outbox are left to the service that owns them."""

    def __init__(self, store: AlertStore) -> None:
        self._store = store

    def due(self, now: float) -> list[Any]:
        return [m for m in self._store.due(now) if m.integration == REPORT_INTEGRATION]

    def __getattr__(self, name: str) -> Any:
        return getattr(self._store, name)


def _report_statuses(store: AlertStore, week: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for m in store.messages(limit=100_000):
        if m.integration == REPORT_INTEGRATION and m.group_key == f"fairness:{week}":
            out[m.status.value] = out.get(m.status.value, 0) + 1
    return out


def _pending_reports(store: AlertStore, week: str) -> bool:
    return _report_statuses(store, week).get("pending", 0) > 0
