"""The push into Alertmanager: after each evaluation, the alerts that are due (`domain.alerts.push.due`)
go to the outbox in batches, one message per batch and Alertmanager replica, so an outage of one replica
delays only its own messages and loses none.

When each alert was last sent is kept in memory, as Prometheus keeps it: after a restart everything active
is sent again at once, which Alertmanager takes as the same alerts.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from watchtower.config.alerting import AlertingConfig
from watchtower.domain.alerts.model import TrackedAlert
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage, idempotency_key
from watchtower.domain.alerts.push import PushPolicy, due, postable
from watchtower.ports import AlertStore

from .evaluation import AlertEvaluator

log = logging.getLogger(__name__)

PUSH_GROUP = "alertmanager-push"  # the outbox's group key of push messages
_NOTHING = NotifyEntry(frozenset(), frozenset(), 0.0)


class AlertmanagerPusher:
    def __init__(
        self,
        *,
        cfg: AlertingConfig,
        evaluation_interval: float,
        external_url: str,
        store: AlertStore,
        evaluator: AlertEvaluator,
    ) -> None:
        self.targets = list(cfg.push_targets())
        self.policy = PushPolicy(
            resend_interval=cfg.push.resend_interval,
            evaluation_interval=evaluation_interval,
            resolved_for=cfg.push.resolved_for,
        )
        self.batch_size = cfg.push.batch_size
        self.external_url = external_url
        self.store, self.evaluator = store, evaluator
        self.sent: dict[str, float] = {}  # fingerprint → when it was last handed to the outbox
        self.on_enqueued: Callable[[], None] | None = None  # the delivery worker's wake-up

    async def push(self, now: float) -> int:
        """Hand the alerts due at `now` to the outbox, for every replica; return how many alerts."""
        alerts = list(self.evaluator.alerts.values())
        # Choosing, building and storing a storm's 10,000 alerts runs off the loop, a batch at a time, each
        # in its own transaction and handed to the delivery worker as it lands: the first batch reaches
        # Alertmanager while the others are still being built. `sent` is only read there and written
        # here, a batch once stored, so a push cut short sends the rest at the next evaluation.
        todo = await asyncio.to_thread(due, alerts, dict(self.sent), now=now, policy=self.policy)
        for i in range(0, len(todo), self.batch_size):
            batch = todo[i : i + self.batch_size]
            await asyncio.to_thread(self._enqueue, batch, i // self.batch_size, now)
            if self.on_enqueued is not None:
                self.on_enqueued()
            for a in batch:
                self.sent[a.fingerprint] = now
        if len(self.sent) > len(alerts):
            live = {a.fingerprint for a in alerts}
            self.sent = {fp: t for fp, t in self.sent.items() if fp in live}
        return len(todo)

    def _enqueue(self, batch: list[TrackedAlert], i: int, now: float) -> int:
        """Store one batch, as one message per replica, in one transaction."""
        docs = [postable(a, policy=self.policy, external_url=self.external_url) for a in batch]
        fps = [a.fingerprint for a in batch]
        items: list[tuple[OutboxMessage | None, str, str, NotifyEntry]] = []
        for target in self.targets:
            msg = OutboxMessage(
                id=0,
                key=idempotency_key(target, f"{PUSH_GROUP}/{i}", now, fps),
                integration=target,
                group_key=PUSH_GROUP,
                payload={"alerts": docs},
                created=now,
                next_attempt=now,
            )
            items.append((msg, target, PUSH_GROUP, _NOTHING))
        return self.store.enqueue(items)
