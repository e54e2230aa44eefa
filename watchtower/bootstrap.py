"""The composition root: settings -> adapters -> services -> the container the API and the runtime read.

Services, the API, the ports and the domain build no adapter: the parts are built here. `build_container`
wires them; the store is resolved once from the settings (`store_location`) and handed to its openers;
`leader_elector` is the election on the Lease. Running the parts (the tick, the serve loop, the leader's
jobs, the way out) is `watchtower.runtime`'s; what each command does is `watchtower.commands`'.

Size: over 400 lines: the one place that builds adapters and wires every part, so each store, recorder and
presenter has its opener here (a few lines each); split by feature, the openers would import each other's
adapters to share the store's resolution, and a reader would gather the wiring from several modules again.
"""

from __future__ import annotations

import contextlib
import logging
import zoneinfo
from collections.abc import Awaitable, Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry

from watchtower.adapters.clock import SystemClock
from watchtower.adapters.kube.decoder import ObjectDecoder as KubeObjectDecoder
from watchtower.adapters.metrics.queue import feed_health_of
from watchtower.adapters.metrics.registry import WatchtowerMetrics
from watchtower.api.container import Container
from watchtower.api.documents import DocumentCache
from watchtower.config.model import Settings
from watchtower.domain.estimate_accuracy import TierAccuracy
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.fairness.week import IsoWeek
from watchtower.domain.health import SourceHealth
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.promql.fairness import FairnessQueries
from watchtower.domain.promql.own import OwnQueries
from watchtower.ports import (
    AlertStore,
    Clock,
    FairnessHistory,
    FairnessMetrics,
    Fence,
    ObjectDecoder,
    ReplayPresenter,
    ReplayRecords,
    ReportOutbox,
    ReportPresenter,
    ReportSource,
)
from watchtower.services.alerting import AlertingMetrics, build_alerting
from watchtower.services.estimate_record import EstimateRecorder, estimates_of
from watchtower.services.fairness_record import FairnessRecorder
from watchtower.services.fairness_report import ClusterNow, FairnessReports
from watchtower.services.fairness_send import FairnessMailer, FairnessSendMetrics
from watchtower.services.gpu_usage import GpuUsageService
from watchtower.services.leadership import LeaderElector, LeaderMetrics, SoleLeader, replica_identity
from watchtower.services.owner_notices import owner_notifier
from watchtower.services.queue_tracker import QueueTracker
from watchtower.services.replay_jobs import ReplayJobs
from watchtower.services.replay_record import ReplayRecorder
from watchtower.services.what_if import records_of, what_if_replays

if TYPE_CHECKING:
    from watchtower.adapters.store.postgres import PostgresAlertStore
    from watchtower.adapters.store.url import StoreLocation

log = logging.getLogger("watchtower")


class StartupError(Exception):
    """The service cannot start for a reason the user fixes (no cluster to reach, ...): one line, no trace."""


class StoreUnavailable(StartupError):
    """The PostgreSQL store cannot be reached now, or dropped the connection (mid-migration too): trying
    again may succeed, unlike a wrong password or a missing database."""


def object_decoder(settings: Settings) -> KubeObjectDecoder:
    """Return the decoder that keeps, of each object, what the settings say Watchtower reads."""
    return KubeObjectDecoder(
        team_label=settings.teams.label,
        keep_labels=frozenset(settings.training.match_labels),
        keep_annotations=frozenset(settings.display.annotations),
        gpu_device_classes=frozenset(settings.gpu.device_classes),
        kueue_gpu_resources=frozenset(settings.gpu.kueue_resources),
        report_annotation=settings.fairness.recipients_annotation,
        read_notify=settings.owners.enabled,
    )


def build_gpu_usage(settings: Settings, tracker: QueueTracker) -> GpuUsageService | None:
    """Return the GPU-usage service the `prometheus:` section describes, or None without that section."""
    from watchtower.adapters.prometheus.reader import PrometheusReader

    cfg = settings.prometheus
    if cfg is None:
        return None
    state = tracker.state
    return GpuUsageService(
        reader=PrometheusReader(url=cfg.url, timeout=cfg.timeout, retries=cfg.retries, backoff=cfg.backoff),
        queries=ExporterQueries(cfg.query_config(settings.teams.label)),
        policy=cfg.idle_policy(),
        tiers=settings.tier_policy(),
        step=cfg.query_step,
        every=cfg.query_every,
        unreachable_failures=cfg.unreachable_failures,
        team_of=state.team_of,
        workload_of=state.control.workload_of_controller,
        class_priority=lambda: {pc.name: pc.value for pc in state.priority_classes.values()},
        holders_included=True,
    )


def build_fairness_metrics(settings: Settings) -> FairnessMetrics | None:
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
    return FairnessQueries(ExporterQueries(config), OwnQueries(settings.artefacts.job_selector))


def store_location(settings: Settings) -> StoreLocation:
    """Return where the state store is: what `store.url` names, else the SQLite file `alerting.store_path`
    or `store.path`. Resolved once by whoever opens the store, and handed to each opener.

    Raises StartupError for a URL naming no database Watchtower can use (the message masks its password)."""
    from watchtower.adapters.store.url import StoreUrlError, resolve_store

    try:
        return resolve_store(settings.store.url, settings.alerting.store_path or settings.store.path)
    except StoreUrlError as e:
        raise StartupError(str(e)) from None


def open_alert_store(settings: Settings, where: StoreLocation | None = None) -> AlertStore | None:
    """Open the alert store at `where` (default: `store_location(settings)`), migrated to this version's
    schema; None if alerting is disabled.

    Raises StartupError for a URL naming no usable database, one that cannot be reached, or a schema
    newer than this version knows; the message shows the URL with its password masked."""
    if not settings.alerting.enabled:
        return None
    where = where or store_location(settings)
    if where.kind == "postgresql":
        store = _connect_postgres(settings, where)
        log.info("alert store: PostgreSQL at %s", where.shown)
        return store
    from watchtower.adapters.store.migrations import StoreVersionError
    from watchtower.adapters.store.sqlite import SQLiteAlertStore

    try:
        return SQLiteAlertStore(where.location)
    except StoreVersionError as e:
        raise StartupError(str(e)) from None


def open_history(
    settings: Settings,
    store: AlertStore | None = None,
    *,
    where: StoreLocation | None = None,
    sync_each_commit: bool = True,
) -> FairnessHistory | None:
    """Open the fairness history in the state store's database at `where` (default:
    `store_location(settings)`; migration 4 of either store); None when `fairness.enabled` is off. On
    PostgreSQL it shares `store`'s connection (a store of its own is opened when alerting is off); on SQLite
    it has its own connection to the same file, which with `sync_each_commit` False does not wait for the
    disk at each commit (SQLiteFairnessHistory).

    Raises StartupError as open_alert_store does."""
    if not settings.fairness.enabled:
        return None
    where = where or store_location(settings)
    if where.kind == "postgresql":
        from watchtower.adapters.history.postgres import PostgresFairnessHistory
        from watchtower.adapters.store.postgres import PostgresAlertStore

        if isinstance(store, PostgresAlertStore):
            return PostgresFairnessHistory(store.transaction)
        own = _connect_postgres(settings, where)
        return PostgresFairnessHistory(own.transaction, on_close=own.close)
    from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
    from watchtower.adapters.store.migrations import StoreVersionError

    try:
        return SQLiteFairnessHistory(where.location, sync_each_commit=sync_each_commit)
    except StoreVersionError as e:
        raise StartupError(str(e)) from None


def _connect_postgres(settings: Settings, where: StoreLocation) -> PostgresAlertStore:
    """Return the PostgreSQL store at `where`, connected and migrated: the one place that connects to it.

    Raises StoreUnavailable when it cannot be reached (or dropped the connection), StartupError when it
    refused us or its schema is newer than this version knows."""
    from watchtower.adapters.store.migrations import StoreVersionError
    from watchtower.adapters.store.postgres import PostgresAlertStore, StoreConnectError

    cfg = settings.store
    password = cfg.password.get_secret_value() if cfg.password is not None else None
    try:
        return PostgresAlertStore(
            where.location,
            password=password,
            claim_for=cfg.claim_for,
            timeout=cfg.timeout,
            migration_timeout=cfg.migration_timeout,
        )
    except StoreConnectError as e:
        raise (StoreUnavailable if e.transient else StartupError)(str(e)) from None
    except StoreVersionError as e:
        raise StartupError(str(e)) from None


def fairness_reports(
    settings: Settings,
    history: FairnessHistory,
    tracker: QueueTracker | None = None,
    pool: ReplayJobs | None = None,
) -> FairnessReports:
    """Return the report builder: with the live cluster's entitlement and namespaces when a queue tracker is
    given (the service), from the store and Prometheus alone when not (the CLI); its "What if" replays in
    the service's replay `pool`, else in a thread."""
    cluster = None
    if tracker is not None:
        from watchtower.domain.fairness.inputs import running_lines, team_namespaces

        w = tracker
        cluster = ClusterNow(
            tick=lambda: w.latest,
            namespaces=lambda: team_namespaces(w.state),
            running=lambda: running_lines(w.state, w.policy.tiers),
        )
    metrics = build_fairness_metrics(settings)
    what_if = what_if_replays(settings, records_of(history), pool)
    return FairnessReports(
        settings=settings,
        history=history,
        metrics=metrics,
        cluster=cluster,
        what_if=what_if,
        estimates=estimates_of(history),
    )


def live_report_source(reports: FairnessReports, clock: Clock) -> ReportSource:
    """Return the report service as a ReportSource: `week`'s report as of the clock's now."""

    def source(week: IsoWeek, team: str | None, /) -> Awaitable[FairnessReport]:
        return reports.build(week, now=clock.now(), team=team)

    return source


def loop_lag_recorder(container: Container) -> Callable[[float], None] | None:
    """Return where the event loop's lag is recorded (`/metrics`), when the container's metrics are ours."""
    m = container.metrics
    return m.loop_lagged if isinstance(m, WatchtowerMetrics) else None


def fairness_recorder(container: Container, *, start_empty: bool = False) -> FairnessRecorder | None:
    """Return the tick consumer that records the fairness history, when the container has a history
    (`start_empty`: not from the store's open waits, for a cluster other than the one the store follows)."""
    from watchtower.domain.fairness.record import RecordPolicy

    reports = container.fairness
    if reports is None:
        return None
    st = container.queue_tracker.state
    settings = container.settings
    every = settings.queue.evaluate_every
    return FairnessRecorder(
        history=reports.history,
        policy=RecordPolicy(
            tiers=container.queue_tracker.policy.tiers,
            gang_stall_after=settings.alerting.rules.gang_stall_after,
            team_of=st.team_of,
            heartbeat_gap=max(120.0, 2 * every + 60.0),
        ),
        # A workload is still there while it has pods or its controller (a Job, a Kueue-suspended job, a
        # refused ReplicaSet) exists: its wait ended placed; otherwise it was deleted while waiting.
        present=lambda k: k in st.by_workload or st.control.controller(k) is not None,
        retention_weeks=settings.fairness.retention_weeks,
        start_empty=start_empty,
    )


def replay_recorder(container: Container, *, start_empty: bool = False) -> ReplayRecorder | None:
    """Return the tick consumer that records what a replay of a past week needs (docs/replay.md), when the
    container's fairness history is a store of ours (its tables are beside the history's)."""
    from watchtower.adapters.history.replay_rows import SqlReplayHistory
    from watchtower.domain.change_log import ChangeCursor
    from watchtower.domain.replay_record import view_of

    reports = container.fairness
    if reports is None or not isinstance(reports.history, SqlReplayHistory):
        return None
    tracker = container.queue_tracker
    st = tracker.state
    cursor = ChangeCursor()
    tracker.log_readers.append(cursor)
    return ReplayRecorder(
        store=reports.history,
        view=lambda tick, touched: view_of(tick, st, touched),
        changes=lambda: cursor.read(st.log),
        workloads=lambda: st.by_workload.keys(),
        tiers=tracker.policy.tiers,
        team_of=st.team_of,
        retention_weeks=container.settings.replay.retention_weeks,
        start_empty=start_empty,
    )


def estimate_recorder(container: Container, *, start_empty: bool = False) -> EstimateRecorder | None:
    """Return the tick consumer that checks the start estimates against the starts (docs/reading-the-cluster.md),
    when the container's fairness history is a store of ours (its table is beside the history's)."""
    from watchtower.adapters.history.estimate_rows import SqlEstimateHistory

    reports = container.fairness
    if reports is None or not isinstance(reports.history, SqlEstimateHistory):
        return None
    st = container.queue_tracker.state
    schedule = container.queue_tracker.history

    def publish(figures: Mapping[str, TierAccuracy]) -> None:
        schedule.accuracy = figures

    tz = zoneinfo.ZoneInfo(container.settings.fairness.timezone)

    def window_start(now: float) -> float:
        return IsoWeek.containing(now, tz).previous().bounds(tz)[0]

    m = container.metrics
    return EstimateRecorder(
        store=reports.history,
        # As the fairness recorder's: still there (started) or deleted while waiting (gone).
        present=lambda k: k in st.by_workload or st.control.controller(k) is not None,
        publish=publish,
        metrics=m if isinstance(m, WatchtowerMetrics) else None,
        retention_weeks=container.settings.fairness.retention_weeks,
        window_start=window_start,
        start_empty=start_empty,
    )


@contextlib.contextmanager
def replay_records(settings: Settings) -> Iterator[ReplayRecords]:
    """Yield the configured store's replay records for a command (`watchtower replay --week/--export`),
    closed after. Raises StartupError when there is nothing to read: `fairness.enabled` off (the records
    are kept beside the history), no SQLite file, a store that cannot be reached."""
    from watchtower.adapters.history.replay_rows import SqlReplayHistory

    if not settings.fairness.enabled:
        raise StartupError(
            "fairness.enabled is off: weeks are recorded for replay beside the fairness history"
        )
    where = store_location(settings)
    if where.kind == "sqlite" and not Path(where.location).is_file():
        raise StartupError(
            f"no state store at {where.location}: run the service (watchtower run) to record weeks"
        )
    history = open_history(settings, where=where)
    assert isinstance(history, SqlReplayHistory)  # ours, fairness.enabled checked above
    try:
        yield history
    finally:
        history.close()


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
    """Return the service's parts wired together: metrics on their own registry, the queue tracker, the GPU-usage
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
    tracker = QueueTracker(
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
        alerting.owners = owner_notifier(settings, tracker.state, alerting.notifier, metrics.registry)
    reports = None
    replays = ReplayJobs(settings.replay)
    if history is not None and settings.fairness.enabled:
        reports = fairness_reports(settings, history, tracker, replays)
        # The page and the weekly email read the same service as the JSON: the report as of the clock's now.
        report_source = report_source or live_report_source(reports, clock)
    if not settings.fairness.enabled:
        report_source = None
    from watchtower.adapters.fleet import HttpFleetReader  # here: importing the root alone loads no httpx

    return Container(
        settings=settings,
        clock=clock,
        queue_tracker=tracker,
        metrics=metrics,
        documents=DocumentCache(tracker.policy.tiers),
        source_name=source_name,
        alerting=alerting,
        alert_store=alert_store if alerting is not None else None,
        gpu=build_gpu_usage(settings, tracker),
        links=dict(links or {}),
        report_source=report_source,
        report_presenter=report_presenter() if report_source is not None else None,
        leadership=leadership,
        fairness=reports,
        replays=replays,
        replay_presenter=replay_presenter(),
        # The other clusters' Watchtowers, read at each visit of the fleet page.
        fleet=HttpFleetReader(settings.fleet) if settings.fleet.clusters else None,
    )


def report_presenter() -> ReportPresenter:
    """Return the presenter of the weekly report (HTML, text, CSV, charts); imports matplotlib."""
    from watchtower.adapters.report.presenter import FairnessPresenter

    return FairnessPresenter()


def replay_presenter() -> ReplayPresenter:
    """Return the presenter of a replay's HTML page (matplotlib is imported at its first page)."""
    from watchtower.adapters.report.replay_page import ReplayPage

    return ReplayPage()


def fairness_mailer(
    container: Container, outbox: ReportOutbox, *, wake: Callable[[], None] | None = None
) -> FairnessMailer | None:
    """Return what enqueues the weekly report emails, or None without a report source."""
    source, presenter = container.report_source, container.report_presenter
    if source is None or presenter is None:
        return None
    settings = container.settings
    base = settings.server.external_url.rstrip("/") if settings.server.external_url else ""
    state = container.queue_tracker.state
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
