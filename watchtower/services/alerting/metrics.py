"""Alerting's own figures on `/metrics`: notifications sent, failed and retried, the outbox, what fires."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge

from watchtower.domain.promql.names import (
    ALERTS_FIRING,
    NOTIFICATIONS_FAILED,
    NOTIFICATIONS_RETRIED,
    NOTIFICATIONS_SENT,
    OUTBOX_DEPTH,
    OUTBOX_OLDEST_UNDELIVERED,
)
from watchtower.ports import AlertStore


class AlertingMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.sent = Counter(NOTIFICATIONS_SENT, "Notifications delivered", ["integration"], registry=registry)
        self.failed = Counter(
            NOTIFICATIONS_FAILED,
            "Notifications given up (refused, gone, or out of attempts)",
            ["integration"],
            registry=registry,
        )
        self.retried = Counter(
            NOTIFICATIONS_RETRIED,
            "Delivery attempts that will be retried",
            ["integration"],
            registry=registry,
        )
        self.outbox_depth = Gauge(OUTBOX_DEPTH, "Notifications waiting to be delivered", registry=registry)
        self.oldest_age = Gauge(
            OUTBOX_OLDEST_UNDELIVERED,
            "Age of the oldest notification not yet delivered (0 when none)",
            registry=registry,
        )
        self.firing = Gauge(ALERTS_FIRING, "Alerts firing", ["alertname", "severity"], registry=registry)

    def observe_outbox(self, store: AlertStore, now: float) -> None:
        self.outbox_depth.set(sum(store.depth().values()))
        oldest = store.oldest_pending()
        self.oldest_age.set(max(0.0, now - oldest) if oldest is not None else 0.0)
