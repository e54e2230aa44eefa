"""What the API reads from the running service, built once by the composition root (watchtower.bootstrap)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from watchtower.config.model import Settings
from watchtower.ports import (
    AlertStore,
    Clock,
    Fence,
    FleetReader,
    MetricsExposition,
    ReplayPresenter,
    ReportPresenter,
    ReportSource,
)
from watchtower.services.alerting import Alerting
from watchtower.services.fairness_report import FairnessReports
from watchtower.services.gpu_usage import GpuUsageService
from watchtower.services.leadership import SoleLeader
from watchtower.services.queue_tracker import QueueTracker
from watchtower.services.replay_jobs import ReplayJobs

from .documents import DocumentCache


@dataclass(frozen=True, slots=True)
class Container:
    settings: Settings
    clock: Clock
    queue_tracker: QueueTracker
    metrics: MetricsExposition
    documents: DocumentCache
    source_name: str  # "kube" or "sim", shown on the status page
    alerting: Alerting | None = None  # None: no alert store given (or alerting disabled)
    alert_store: AlertStore | None = None
    gpu: GpuUsageService | None = None  # None: no `prometheus:` section
    links: Mapping[str, str] = field(default_factory=dict)  # name → URL shown on the page (demo sinks, ...)
    # The weekly fairness report: the service (None: fairness off or no store), the source the page and
    # the email read (the same service as of the clock's now) and its presenter; None: no report page.
    fairness: FairnessReports | None = None
    report_source: ReportSource | None = None
    report_presenter: ReportPresenter | None = None
    # Who leads: a SoleLeader unless leader election is on (then the LeaderElector the root runs).
    leadership: Fence = field(default_factory=SoleLeader)
    # Policy replays (`POST /api/v1/replays`) and their page's presenter; None: this service runs none.
    replays: ReplayJobs | None = None
    replay_presenter: ReplayPresenter | None = None
    # ISO week -> the page of a replay of it offered ready (the demo's past week), linked from the status page
    # and that week's fairness report.
    week_replays: dict[str, str] = field(default_factory=dict)
    # The other clusters' Watchtowers for the fleet page; None: no `fleet.clusters` (the page shows this one).
    fleet: FleetReader | None = None
