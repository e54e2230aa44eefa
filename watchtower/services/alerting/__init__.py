"""Alerting, split by job: evaluation (rules → lifecycle → store), notification (groups → outbox), the
push into Alertmanager (due alerts → outbox), delivery (outbox → senders) and administration (silences,
receivers, listing).

`build_alerting` wires the first, second and fourth on one store; the serve loop adds the delivery
worker with the senders it built.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from watchtower.config.model import Settings
from watchtower.domain.alerts.dispatch import Dispatcher
from watchtower.domain.tick import Tick
from watchtower.ports import AlertStore

from .admin import AlertAdmin
from .delivery import DeliveryWorker
from .evaluation import AlertEvaluator, alerts_for_snapshot, rule_settings
from .integrations import integration_configs, integrations
from .metrics import AlertingMetrics
from .notify import GroupNotifier
from .push import AlertmanagerPusher

if TYPE_CHECKING:
    from watchtower.services.owner_notices import OwnerNotifier


@dataclass(slots=True)
class Alerting:
    evaluator: AlertEvaluator
    notifier: GroupNotifier
    admin: AlertAdmin
    store: AlertStore
    metrics: AlertingMetrics | None = None
    pusher: AlertmanagerPusher | None = None
    owners: OwnerNotifier | None = None  # owner notices (`owners.enabled`), after the alerts' own
    _receivers_checked: bool = field(default=False, repr=False)
    _followed: bool = field(default=False, repr=False)  # another replica led since the alerts were loaded

    async def on_tick(self, tick: Tick) -> None:
        """Evaluate a Tick, then hand on the groups that are due (the leader's work)."""
        if self._followed:
            await self.evaluator.reload(regroup=True)
            if self.pusher is not None:
                self.pusher.sent.clear()  # sent again at once: Alertmanager takes them as the same alerts
            self._followed = False
        if not self._receivers_checked:
            self.admin.enable_changed_receivers(tick.at)
            self._receivers_checked = True
        await self.evaluator.on_tick(tick)
        if self.pusher is not None:
            await self.pusher.push(tick.at)
        await self.notifier.flush(tick.at)
        if self.owners is not None:
            self.owners.start(tick, self._wake_delivery)

    def _wake_delivery(self) -> None:
        if self.notifier.on_enqueued is not None:
            self.notifier.on_enqueued()

    async def reconfigure(self, settings: Settings, *, worker: DeliveryWorker | None = None) -> None:
        """Take what a running service can of new settings (watchtower.config.changes.LIVE): the rules'
        settings, routes, receivers, inhibition, delivery retries.

        Done between evaluations and flushes. A changed routing tree starts its groups afresh: they are
        filled again at the next evaluation and the notification log keeps what was sent from being sent
        again. The worker's senders are the caller's to rebuild (they hold its HTTP client)."""
        cfg = settings.alerting
        ev, n = self.evaluator, self.notifier
        async with ev._evaluating, n._flushing:
            ev.tiers = settings.tier_policy()
            ev.rule_settings = rule_settings(settings)
            ev.lifecycle = cfg.rules.lifecycle(cfg.resolved_retention)
            tree = cfg.route_tree()
            if tree != ev.dispatcher.root:
                ev.dispatcher = Dispatcher(tree)
                ev._restored = False  # file the alerts in memory into the new groups first
            n.inhibit_rules = cfg.inhibitions()
            n.integrations = {} if cfg.delivery.mode == "alertmanager" else integrations(cfg)
            self.admin.integrations = n.integrations
            self.admin.integration_configs = integration_configs(cfg)
            if worker is not None:
                worker.delivery = cfg.delivery
                worker.configs = integration_configs(cfg)
            self._receivers_checked = False  # an integration whose configuration changed is enabled again

    def config_invalid(self, problems: Sequence[str]) -> None:
        """Raise WatchtowerConfigInvalid with these problems from the next evaluation on; () resolves it."""
        self.evaluator.config_problems = tuple(problems)

    async def follow(self) -> None:
        """On a replica that does not lead: read the alerts the leader stored, for the API to list."""
        await self.evaluator.reload(regroup=False)
        self._followed = True
        if self.owners is not None:
            self.owners.reset()

    def lead(self) -> None:
        """This replica leads from now on: its next evaluation starts from what the store holds."""
        self._followed = True
        if self.owners is not None:
            self.owners.reset()  # what the former leader sent is read back from the store


def build_alerting(
    *,
    settings: Settings,
    store: AlertStore,
    metrics: AlertingMetrics | None = None,
    new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
) -> Alerting:
    evaluator = AlertEvaluator(settings=settings, store=store, metrics=metrics)
    notifier = GroupNotifier(
        cfg=settings.alerting, external_url=settings.server.external_url, store=store, evaluator=evaluator
    )
    evaluator.on_changed = notifier.wake
    if settings.alerting.delivery.mode == "alertmanager":
        # Alertmanager groups and notifies: the built-in router keeps its state (the API lists it) but
        # hands nothing to the receivers.
        notifier.integrations = {}
    pusher = None
    if settings.alerting.push_targets():
        pusher = AlertmanagerPusher(
            cfg=settings.alerting,
            evaluation_interval=settings.queue.evaluate_every,
            external_url=settings.server.external_url,
            store=store,
            evaluator=evaluator,
        )
    admin = AlertAdmin(
        cfg=settings.alerting, store=store, evaluator=evaluator, notifier=notifier, new_id=new_id
    )
    return Alerting(evaluator, notifier, admin, store, metrics, pusher)


__all__ = [
    "AlertAdmin",
    "AlertEvaluator",
    "Alerting",
    "AlertingMetrics",
    "AlertmanagerPusher",
    "DeliveryWorker",
    "GroupNotifier",
    "alerts_for_snapshot",
    "build_alerting",
    "integration_configs",
    "integrations",
    "rule_settings",
]
