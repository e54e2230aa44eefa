"""What the API needs from the running service, built once by the composition root (watchtower.main)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from watchtower.adapters.metrics import WatchtowerMetrics
from watchtower.config.model import Settings
from watchtower.ports import Clock
from watchtower.services.alerting import AlertingService, AlertStore
from watchtower.services.gpu_usage import GpuUsageService
from watchtower.services.watch import Watcher


@dataclass(frozen=True, slots=True)
class Container:
    settings: Settings
    clock: Clock
    watcher: Watcher
    metrics: WatchtowerMetrics
    source_name: str  # "kube" or "sim", shown on the status page
    alerting: AlertingService | None = None  # None: no alert store given (or alerting disabled)
    alert_store: AlertStore | None = None
    gpu: GpuUsageService | None = None  # None: no `prometheus:` section
    links: Mapping[str, str] = field(default_factory=dict)  # name → URL shown on the page (demo sinks, ...)
