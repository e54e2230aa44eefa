"""The delivery of notifications, wired for the serve loop: the worker and its senders (the weekly report's
among them), the silences API, the store's prune job and the weekly report's job."""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from watchtower.api.container import Container
from watchtower.bootstrap import fairness_mailer
from watchtower.config.model import Settings
from watchtower.ports import AlertStore, Clock, Sender
from watchtower.runtime.fleet_report import fleet_mailer
from watchtower.runtime.weekly_report import schedule_fairness
from watchtower.services.alerting import DeliveryWorker
from watchtower.services.fairness_send import REPORT_INTEGRATION
from watchtower.services.owner_outbox import owner_lanes

if TYPE_CHECKING:
    import httpx
    from fastapi import APIRouter

log = logging.getLogger("watchtower")

PRUNE_STORE_EVERY = 3600.0  # seconds between prunes of expired silences and delivered outbox rows


@dataclass(frozen=True, slots=True)
class Delivery:
    worker: DeliveryWorker
    report_sender: Sender | None  # the weekly report's, kept beside the alert senders a reload rebuilds
    router: APIRouter  # the silences API
    owner_sender: Sender | None = None  # owners' own addresses (owners.smtp_receiver's SMTP), kept likewise


def wire_delivery(container: Container, scheduler: Any, http: httpx.AsyncClient) -> Delivery | None:
    """Return the delivery worker wired to alerting (woken by what it enqueues), its senders through the
    `http` client and the silences API; add the store's prune job and, with `fairness.send`, the weekly
    report's job to `scheduler` (sending the fleet report too with `fleet.report.send`). None without alerting or its store."""
    from watchtower.adapters.senders import build_report_sender, build_senders
    from watchtower.api import deps
    from watchtower.api.routes.alerts import build_router

    settings = container.settings
    fence = container.leadership
    alerting, store = container.alerting, container.alert_store
    if alerting is None or store is None:
        return None
    senders = build_senders(settings.alerting, http=http, cluster_label=settings.cluster.label)
    fairness = settings.fairness
    report_sender = (
        build_report_sender(settings.alerting, receiver=fairness.smtp_receiver, http=http)
        if fairness.send
        else None
    )
    if report_sender is not None:
        senders[REPORT_INTEGRATION] = report_sender
    # Owner notices to annotated addresses: the SMTP settings of one email receiver, each message's own `to`.
    owner_sender = (
        build_report_sender(settings.alerting, receiver=settings.owners.smtp_receiver, http=http)
        if settings.owners.enabled
        else None
    )
    if owner_sender is not None:
        senders.update(owner_lanes(owner_sender))
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
    router = build_router(alerting.admin, require_token=deps.require_token, clock=container.clock)
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
            fleet = (
                fleet_mailer(settings, store, container.clock, wake=worker.wake.set)
                if settings.fleet.report.send
                else None
            )
            schedule_fairness(scheduler, mailer, fairness, now=time.time(), fence=fence, fleet=fleet)
    return Delivery(worker=worker, report_sender=report_sender, router=router, owner_sender=owner_sender)


def _prune_store(store: AlertStore, settings: Settings, clock: Clock) -> None:
    r = settings.alerting.retention
    removed = store.prune(clock.now(), silence_retention=r.silences, delivered_retention=r.delivered)
    # A week's send keys are kept as long as its history: no report of a kept week is sent twice.
    store.prune_keys(clock.now() - settings.fairness.retention_weeks * 7 * 86400.0)
    log.info("alert store pruned: %s", removed)
