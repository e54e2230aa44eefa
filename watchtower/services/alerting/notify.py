"""Notification: the groups whose `group_wait`/`group_interval`/`repeat_interval` has come → the outbox.

Runs between ticks too (`run`), so a group goes out when it is due, not at the next evaluation.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from watchtower.config.alerting import AlertingConfig
from watchtower.domain.alerts.dispatch import Flush
from watchtower.domain.alerts.model import AlertState
from watchtower.domain.alerts.muting import Muted, muted
from watchtower.domain.alerts.notify import NotifyEntry, notify_reason
from watchtower.domain.alerts.outbox import OutboxMessage, idempotency_key
from watchtower.domain.alerts.payload import webhook_payload
from watchtower.ports import AlertStore, Clock

from .evaluation import AlertEvaluator
from .integrations import integrations


class GroupNotifier:
    def __init__(
        self,
        *,
        cfg: AlertingConfig,
        external_url: str,
        store: AlertStore,
        evaluator: AlertEvaluator,
    ) -> None:
        self.store = store
        self.evaluator = evaluator
        self.external_url = external_url
        self.inhibit_rules = cfg.inhibitions()
        self.integrations = integrations(cfg)
        self.on_enqueued: Callable[[], None] | None = None  # the delivery worker's wake-up
        self._wake = asyncio.Event()
        self._flushing = asyncio.Lock()

    def wake(self) -> None:
        self._wake.set()

    def muted(self, now: float) -> dict[str, Muted]:
        """Return fingerprint → why it is muted, for the alerts that are."""
        return muted(list(self.evaluator.alerts.values()), self.store.silences(), self.inhibit_rules, now=now)

    def next_flush_at(self) -> float | None:
        return self.evaluator.dispatcher.next_due()

    async def flush(self, now: float) -> int:
        """Hand the groups whose time has come to the outbox; return how many messages were stored.

        The payloads are built and stored in a worker thread (a storm's groups hold 10,000 alerts,
        megabytes of JSON), group by group, each in its own transaction, telling the worker as each lands:
        in a storm the first group goes out while the others are still being built.
        """
        dispatcher = self.evaluator.dispatcher
        async with self._flushing:
            flushes = dispatcher.due(now=now)
            if not flushes:
                return 0
            mutes = await asyncio.to_thread(self.muted, now)
            stored = 0
            for f in flushes:
                n = await asyncio.to_thread(self._enqueue, f, now, mutes)
                dispatcher.flushed(f)
                stored += n
                if n and self.on_enqueued is not None:
                    self.on_enqueued()
            return stored

    def _enqueue(self, f: Flush, now: float, mutes: Mapping[str, Muted]) -> int:
        items: list[tuple[OutboxMessage | None, str, str, NotifyEntry]] = []
        live = [a for a in f.alerts if a.fingerprint not in mutes]
        firing = frozenset(a.fingerprint for a in live if a.state is AlertState.FIRING)
        resolved = frozenset(a.fingerprint for a in live if a.state is AlertState.RESOLVED)
        # The integrations of a receiver get the same body: built once per group (and per choice of
        # send_resolved), not once per email address and webhook.
        payloads: dict[tuple[bool, str], dict[str, Any]] = {}
        group_key = f.route.alertmanager_group_key(f.labels)
        for integ in self.integrations.get(f.route.receiver, []):
            key = integ.key
            entry = self.store.nflog(key, f.key)
            reason = notify_reason(
                entry,
                firing,
                resolved,
                now=now,
                repeat_interval=f.route.repeat_interval,
                send_resolved=integ.send_resolved,
            )
            if not reason:
                continue
            shown = [a for a in live if a.state is AlertState.FIRING or integ.send_resolved]
            msg: OutboxMessage | None = None
            if shown:
                payload = payloads.get((integ.send_resolved, reason))
                if payload is None:
                    payload = payloads[integ.send_resolved, reason] = webhook_payload(
                        receiver=integ.receiver,
                        group_key=group_key,
                        group_labels=f.labels,
                        alerts=shown,
                        external_url=self.external_url,
                        reason=reason,
                    )
                msg = OutboxMessage(
                    id=0,
                    key=idempotency_key(key, f.key, now, firing | resolved),
                    integration=key,
                    group_key=f.key,
                    payload=payload,
                    created=now,
                    next_attempt=now,
                )
            items.append((msg, key, f.key, NotifyEntry(firing, resolved, now)))
        return self.store.enqueue(items)

    async def run(self, clock: Clock) -> None:
        """Flush groups when they are due, until cancelled."""
        while True:
            now = clock.now()
            if await self.flush(now) and self.on_enqueued is not None:
                self.on_enqueued()
            nxt = self.next_flush_at()
            wait = 5.0 if nxt is None else min(5.0, max(0.0, nxt - clock.now()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait)
