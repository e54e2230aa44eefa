"""What the API needs from the running service, built once by the composition root (watchtower.main)."""

from __future__ import annotations

from dataclasses import dataclass

from watchtower.adapters.metrics import WatchtowerMetrics
from watchtower.config.model import Settings
from watchtower.ports import Clock
from watchtower.services.watch import Watcher


@dataclass(frozen=True, slots=True)
class Container:
    settings: Settings
    clock: Clock
    watcher: Watcher
    metrics: WatchtowerMetrics
    source_name: str  # "kube" or "sim", shown on the status page
