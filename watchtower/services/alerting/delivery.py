"""Delivery: drains the outbox, one message at a time per integration, in order, with backoff.

A message is marked as attempted before it is sent and delivered after, so a crash re-sends at most that
one message, under the same idempotency key.

Fencing: only the leader sends. Each pass over the outbox is made under the leader's term (the Lease
transition it leads under), and each send checks, right before it goes out, that this process still leads
under that term by its own clock; if not, the message is left due in the outbox for the new leader (not
failed). `stop` makes the worker take no new message and return once the sends under way are done.

Every store call runs in a worker thread: each write is a transaction synced to disk, and the store is
shared with the evaluation, whose storm transactions hold it for a good part of a second; on the loop,
either would stall the API and the flushes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping

from watchtower.config.alerting import AlertingConfig
from watchtower.domain.alerts.backoff import next_delay
from watchtower.domain.alerts.outbox import DeliveryResult, OutboxMessage, Outcome
from watchtower.ports import AlertStore, Clock, Fence, Sender

from .integrations import integration_configs
from .metrics import AlertingMetrics

log = logging.getLogger(__name__)

# Integrations whose messages go out in batches (`_attempt_batch`): the owner notices' lanes, which a storm
# fills with thousands of messages, each to one owner. On-call's integrations carry a few group
# notifications at a time and keep their one-message guarantee: a crash re-sends at most the one in flight.
BATCHED = ("owner-notices/",)
BATCH_SIZE = 64
BATCH_FLUSH = 1.0  # seconds: a batch's deliveries are written at least this often while it sends


class DeliveryWorker:
    """Drains the outbox: per integration, the oldest pending message first, retried with backoff."""

    def __init__(
        self,
        *,
        store: AlertStore,
        senders: Mapping[str, Sender],
        clock: Clock,
        cfg: AlertingConfig,
        metrics: AlertingMetrics | None = None,
        rnd: Callable[[], float] = random.random,
        fence: Fence | None = None,
    ) -> None:
        self.store, self.senders, self.clock, self.metrics, self.rnd = store, senders, clock, metrics, rnd
        self.delivery = cfg.delivery
        self.configs = integration_configs(cfg)
        self.fence = fence
        self.wake = asyncio.Event()
        self.stopping = False
        self.handed_back = 0  # messages left in the outbox because leadership was lost before their send
        self.sending = 0  # sends under way now

    def stop(self) -> None:
        """Take no new message; `run` returns once the sends under way are done."""
        self.stopping = True
        self.wake.set()

    def _may_send(self, term: int | None) -> bool:
        return self.fence is None or (term is not None and self.fence.holds(term))

    async def drain(self) -> int:
        """Attempt every message that is due, integrations side by side; return the attempts made.

        Each integration is its own lane: whenever an attempt ends, `wake` is set (a new message) or a
        second passes (a backoff may have run out), the outbox is read again and every free lane takes its
        next due message. A receiver that hangs until its timeout holds only its own messages; others used
        to wait for the slowest head of each round.
        """
        made = 0
        term = self.fence.term() if self.fence is not None else None
        lanes: dict[str, asyncio.Task[bool]] = {}
        claimed: dict[str, OutboxMessage] = {}  # what each lane tries: claimed by this replica's session
        try:
            while not self.stopping and self._may_send(term):
                self.wake.clear()
                heads = await self._due(claimed)
                for m in heads:
                    if m.integration not in lanes:
                        lanes[m.integration] = asyncio.create_task(self._attempt(m, term))
                        claimed[m.integration] = m
                if not lanes:
                    break
                woken = asyncio.ensure_future(self.wake.wait())
                try:
                    await asyncio.wait(
                        [*lanes.values(), woken], timeout=1.0, return_when=asyncio.FIRST_COMPLETED
                    )
                finally:
                    woken.cancel()
                for integration, task in list(lanes.items()):
                    if task.done():
                        del lanes[integration], claimed[integration]
                        made += 1
                        task.result()  # a store error raises here, as it did out of the round's gather
        except asyncio.CancelledError:
            # Leadership lost (the service cancels the leader's jobs) or the service stopping: a message
            # being sent may or may not have reached its receiver; it stays pending for the next leader,
            # under its id, and this replica's claim on it goes now.
            for task in lanes.values():
                task.cancel()
            await asyncio.gather(*lanes.values(), return_exceptions=True)
            lanes.clear()
            await self._hand_back_all(claimed.values())
            raise
        finally:
            # Stopping or no longer leading: the sends under way finish (each bounded by its timeout).
            if lanes:
                await asyncio.gather(*lanes.values(), return_exceptions=True)
        if self.metrics is not None:
            await asyncio.to_thread(self.metrics.observe_outbox, self.store, self.clock.now())
        return made

    async def _due(self, claimed: Mapping[str, OutboxMessage]) -> list[OutboxMessage]:
        """Return the due heads, claimed for this replica. Cancelled while the store claims them, the claim
        still lands (the thread runs on): it is handed back, unless a lane already holds the message."""
        claiming = asyncio.ensure_future(asyncio.to_thread(self.store.due, self.clock.now()))
        try:
            return await asyncio.shield(claiming)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                held = {m.id for m in claimed.values()}
                await self._hand_back_all(m for m in await claiming if m.id not in held)
            raise

    async def _attempt(self, msg: OutboxMessage, term: int | None = None) -> bool:
        """Try one message under the leader's `term`; return True if the integration may go on to its
        next message now."""
        if self.stopping:
            return False
        if not self._may_send(term):
            await self._hand_back(msg, msg.next_attempt, msg.last_error)
            return False
        now = self.clock.now()
        sender = self.senders.get(msg.integration)
        store = self.store
        if sender is None:
            await asyncio.to_thread(store.failed, msg.id, "no such integration in the configuration any more")
            self._count("failed", msg.integration)
            return True
        if msg.integration.startswith(BATCHED):
            return await self._attempt_batch(msg, sender, term, now)
        await asyncio.to_thread(store.begin_attempt, msg.id, now)
        if not self._may_send(term):
            # Lost the lease while recording the attempt: the message stays pending and due, and the new
            # leader sends it under the same idempotency key.
            log.info("not leading any more: %s to %s left for the new leader", msg.key, msg.integration)
            await self._hand_back(msg, now, "not sent: leadership was lost before the send")
            self.handed_back += 1
            return False
        res = await self._send(sender, msg, now)
        done = self.clock.now()
        if res.outcome is Outcome.SENT:
            await asyncio.to_thread(store.delivered, msg.id, done)
            self._count("sent", msg.integration)
            return True
        return await self._not_sent(msg, res, done)

    async def _attempt_batch(self, head: OutboxMessage, sender: Sender, term: int | None, now: float) -> bool:
        """Send `head` and the due messages after it in its integration, in order, up to `BATCH_SIZE`: their
        attempts recorded in one transaction before the first send, their deliveries in one after the last
        (or every `BATCH_FLUSH` seconds), so a crash re-sends at most the messages sent since the last write,
        each under its own idempotency key. The first one not sent ends the batch; the rest stay pending."""
        store = self.store
        # Cancelled (leadership lost, stopping) while the store claims the batch, or while it is sent: its
        # claims are released at once, as `_due` and `run` release the heads', rather than held from the next
        # leader by this replica's live session for `store.claim_for`.
        setup = asyncio.ensure_future(asyncio.to_thread(self._begin_batch, head, now))
        try:
            batch = await asyncio.shield(setup)
        except asyncio.CancelledError:
            with contextlib.suppress(Exception):
                taken = await setup
                await asyncio.to_thread(store.settle, [], self.clock.now(), [m.id for m in taken])
            raise
        sent: list[int] = []
        at = [0]
        try:
            return await self._send_batch(batch, sender, term, sent, at)
        except asyncio.CancelledError:
            # The one being sent may or may not have arrived: it goes again, under its id.
            rest = [m.id for m in batch[at[0] :] if m.id not in sent]
            try:
                await asyncio.shield(asyncio.to_thread(store.settle, sent, self.clock.now(), rest))
            except Exception as e:
                log.warning(
                    "could not release %d messages to %s for the next leader: %s",
                    len(rest),
                    head.integration,
                    e,
                )
            raise

    def _begin_batch(self, head: OutboxMessage, now: float) -> list[OutboxMessage]:
        batch = [head, *self.store.following(head, now, BATCH_SIZE - 1)]
        self.store.begin_attempts([m.id for m in batch], now)
        return batch

    async def _send_batch(
        self, batch: list[OutboxMessage], sender: Sender, term: int | None, sent: list[int], at: list[int]
    ) -> bool:
        """The sends of `_attempt_batch`; `sent` holds the ids sent and not yet recorded as delivered, `at[0]`
        the index of the message in hand."""
        store = self.store
        flushed = time.monotonic()
        for i, msg in enumerate(batch):
            at[0] = i
            if self.stopping or not self._may_send(term):
                if not self._may_send(term):
                    log.info(
                        "not leading any more: %d messages to %s left for the new leader",
                        len(batch) - i,
                        msg.integration,
                    )
                    self.handed_back += len(batch) - i
                await asyncio.to_thread(store.settle, sent, self.clock.now(), [m.id for m in batch[i:]])
                return False
            res = await self._send(sender, msg, self.clock.now())
            done = self.clock.now()
            if res.outcome is Outcome.SENT:
                sent.append(msg.id)
                self._count("sent", msg.integration)
                if time.monotonic() - flushed >= BATCH_FLUSH:
                    await asyncio.to_thread(store.settle, list(sent), done)
                    sent.clear()
                    flushed = time.monotonic()
                continue
            await asyncio.to_thread(store.settle, sent, done, [m.id for m in batch[i + 1 :]])
            return await self._not_sent(msg, res, done)
        await asyncio.to_thread(store.settle, sent, self.clock.now())
        return True

    async def _send(self, sender: Sender, msg: OutboxMessage, now: float) -> DeliveryResult:
        self.sending += 1
        try:
            return await sender.send(msg, now=now)
        except Exception as e:  # a sender bug must not kill the worker; the message is retried
            log.exception("sender for %s failed", msg.integration)
            return DeliveryResult(Outcome.RETRY, f"{type(e).__name__}: {e}")
        finally:
            self.sending -= 1

    async def _not_sent(self, msg: OutboxMessage, res: DeliveryResult, done: float) -> bool:
        """Record an attempt that did not deliver: disabled (410), given up, or retried later."""
        store = self.store
        if res.outcome is Outcome.GONE:
            log.warning("%s answered 410 Gone: disabled (%s)", msg.integration, res.detail)
            await asyncio.to_thread(
                functools.partial(
                    store.disable,
                    msg.integration,
                    f"410 Gone at {msg.integration}: {res.detail}",
                    done,
                    config=self.configs.get(msg.integration, ""),
                )
            )
            self._count("failed", msg.integration)
            return False
        if res.outcome is Outcome.REJECTED or msg.attempts + 1 >= self.delivery.max_attempts:
            log.warning("giving up %s to %s: %s", msg.key, msg.integration, res.detail)
            await asyncio.to_thread(store.failed, msg.id, res.detail)
            self._count("failed", msg.integration)
            return True
        d = self.delivery
        delay = next_delay(
            msg.attempts + 1,
            base=d.backoff_base,
            cap=d.backoff_cap,
            jitter=d.jitter,
            rnd=self.rnd(),
            retry_after=res.retry_after,
            retry_after_cap=d.retry_after_cap,
        )
        await asyncio.to_thread(store.retry_at, msg.id, done + delay, res.detail)
        self._count("retried", msg.integration)
        return False

    async def _hand_back(self, msg: OutboxMessage, when: float, error: str) -> None:
        """Release this replica's claim on a message it will not send (leadership lost): on PostgreSQL the
        claim would otherwise hold it, and every later message of its integration, from the new leader for
        `store.claim_for` (2 min), since this replica's session is still alive."""
        await asyncio.to_thread(self.store.retry_at, msg.id, when, error)

    async def _hand_back_all(self, messages: Iterable[OutboxMessage]) -> None:
        """Release the claims on `messages` as they were (cancelled: the store may be going too, so a
        failure is only logged; the claims then lapse at `store.claim_for`)."""
        for m in list(messages):
            try:
                await self._hand_back(m, m.next_attempt, m.last_error)
            except Exception as e:
                log.warning("could not release %s to %s for the next leader: %s", m.key, m.integration, e)
                return

    def _count(self, what: str, integration: str) -> None:
        if self.metrics is not None:
            getattr(self.metrics, what).labels(integration).inc()

    async def run(self) -> None:
        """Deliver until cancelled or stopped; sleeps until the next attempt is due or `wake` is set."""
        while not self.stopping:
            await self.drain()
            if self.stopping:
                break
            nxt = await asyncio.to_thread(self.store.next_attempt_at)
            wait = 5.0 if nxt is None else min(5.0, max(0.05, nxt - self.clock.now()))
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=wait)
