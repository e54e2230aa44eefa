"""Alerting, live: each queue snapshot → rules → lifecycle → groups → outbox; a worker drains the outbox.

`AlertingService.on_snapshot(snapshot, now)` is a snapshot consumer of the Watcher. `run(clock)` flushes
groups when their `group_wait`/`group_interval` comes, between ticks. `DeliveryWorker.run()` sends what
the outbox holds, one message at a time per integration, in order, with backoff; a message is marked as
attempted before it is sent and delivered after, so a crash re-sends at most that one message, under the
same idempotency key.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import random
import ssl
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import httpx
import orjson
from prometheus_client import CollectorRegistry, Counter, Gauge
from pydantic import BaseModel, SecretStr

from watchtower.adapters.email import EmailSender
from watchtower.adapters.webhook import WebhookSender
from watchtower.config.alerting import AlertingConfig
from watchtower.config.model import Settings
from watchtower.domain.alerts.backoff import next_delay
from watchtower.domain.alerts.dispatch import Dispatcher, Flush
from watchtower.domain.alerts.holders import gpu_holders
from watchtower.domain.alerts.inhibition import inhibited
from watchtower.domain.alerts.lifecycle import Transition, advance
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.model import AlertState, TrackedAlert
from watchtower.domain.alerts.notify import NotifyEntry, needs_update
from watchtower.domain.alerts.outbox import (
    DeliveryResult,
    DisabledIntegration,
    OutboxMessage,
    Outcome,
    idempotency_key,
)
from watchtower.domain.alerts.payload import webhook_payload
from watchtower.domain.alerts.rules import RuleInput, RuleSettings, WatchHealth, evaluate_rules
from watchtower.domain.alerts.silences import Silence, expire, new_silence, silenced_by
from watchtower.domain.gpu_usage import GpuAlert
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.domain.tiers import TierPolicy
from watchtower.ports import Clock

log = logging.getLogger(__name__)

# How far the stored `last_seen` of an alert may lag behind the one in memory (seconds).
LAST_SEEN_SLACK = 60.0


class AlertStore(Protocol):
    """What alerting keeps across restarts; SQLiteAlertStore implements it, a PostgreSQL store could."""

    def load_alerts(self) -> list[TrackedAlert]: ...
    def save_alerts(self, upsert: Iterable[TrackedAlert], delete: Iterable[str] = ()) -> None: ...
    def silences(self) -> list[Silence]: ...
    def put_silence(self, s: Silence) -> None: ...
    def nflog(self, integration: str, group_key: str) -> NotifyEntry | None: ...
    def enqueue(self, items: Iterable[tuple[OutboxMessage | None, str, str, NotifyEntry]]) -> int: ...
    def due(self, now: float) -> list[OutboxMessage]: ...
    def next_attempt_at(self) -> float | None: ...
    def begin_attempt(self, msg_id: int, now: float) -> None: ...
    def delivered(self, msg_id: int, now: float) -> None: ...
    def retry_at(self, msg_id: int, when: float, error: str) -> None: ...
    def failed(self, msg_id: int, error: str) -> None: ...
    def disable(self, integration: str, reason: str, now: float, *, config: str = "") -> None: ...
    def enable(self, integration: str, now: float) -> bool: ...
    def disabled(self) -> dict[str, str]: ...
    def disabled_details(self) -> list[DisabledIntegration]: ...
    def depth(self) -> dict[str, int]: ...
    def oldest_pending(self) -> float | None: ...
    def messages(self, *, limit: int = 50, status: str | None = None) -> list[OutboxMessage]: ...


class Sender(Protocol):
    async def send(self, msg: OutboxMessage, *, now: float) -> DeliveryResult: ...


class AlertingMetrics:
    def __init__(self, *, registry: CollectorRegistry) -> None:
        self.sent = Counter(
            "watchtower_notifications_sent", "Notifications delivered", ["integration"], registry=registry
        )
        self.failed = Counter(
            "watchtower_notifications_failed",
            "Notifications given up (refused, gone, or out of attempts)",
            ["integration"],
            registry=registry,
        )
        self.retried = Counter(
            "watchtower_notifications_retried",
            "Delivery attempts that will be retried",
            ["integration"],
            registry=registry,
        )
        self.outbox_depth = Gauge(
            "watchtower_outbox_depth", "Notifications waiting to be delivered", registry=registry
        )
        self.oldest_age = Gauge(
            "watchtower_outbox_oldest_undelivered_seconds",
            "Age of the oldest notification not yet delivered (0 when none)",
            registry=registry,
        )
        self.firing = Gauge(
            "watchtower_alerts_firing", "Alerts firing", ["alertname", "severity"], registry=registry
        )

    def observe_outbox(self, store: AlertStore, now: float) -> None:
        self.outbox_depth.set(sum(store.depth().values()))
        oldest = store.oldest_pending()
        self.oldest_age.set(max(0.0, now - oldest) if oldest is not None else 0.0)


@dataclass(frozen=True, slots=True)
class Integration:
    id: str  # "<receiver>/email/0"
    receiver: str
    send_resolved: bool


def integrations(cfg: AlertingConfig) -> dict[str, list[Integration]]:
    """Return receiver name → its integrations, in configuration order."""
    out: dict[str, list[Integration]] = {}
    for r in cfg.receivers:
        lst = out.setdefault(r.name, [])
        lst.extend(Integration(f"{r.name}/email/{i}", r.name, e.send_resolved) for i, e in enumerate(r.email))
        lst.extend(
            Integration(f"{r.name}/webhook/{i}", r.name, w.send_resolved) for i, w in enumerate(r.webhooks)
        )
    return out


def integration_configs(cfg: AlertingConfig) -> dict[str, str]:
    """Return integration id → a digest of its configuration (secrets included), to notice a change."""
    out: dict[str, str] = {}
    for r in cfg.receivers:
        kinds: list[tuple[str, Sequence[BaseModel]]] = [("email", r.email), ("webhook", r.webhooks)]
        for kind, items in kinds:
            for i, c in enumerate(items):
                body = orjson.dumps(
                    c.model_dump(),
                    default=lambda v: v.get_secret_value() if isinstance(v, SecretStr) else str(v),
                    option=orjson.OPT_SORT_KEYS,
                )
                out[f"{r.name}/{kind}/{i}"] = hashlib.sha256(body).hexdigest()[:16]
    return out


def build_senders(
    cfg: AlertingConfig,
    *,
    http: httpx.AsyncClient,
    tls_context: ssl.SSLContext | None = None,
) -> dict[str, Sender]:
    """Return integration id → its sender, from the configuration."""
    out: dict[str, Sender] = {}
    for r in cfg.receivers:
        for i, e in enumerate(r.email):
            ctx = tls_context
            if ctx is None and e.security != "none":
                ctx = ssl.create_default_context(cafile=e.ca_file)
                if not e.verify:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
            out[f"{r.name}/email/{i}"] = EmailSender(
                host=e.smarthost,
                port=e.port,
                sender=e.from_,
                to=list(e.to),
                security=e.security,
                username=e.username,
                password=e.password.get_secret_value() if e.password else None,
                timeout=e.timeout,
                deadline=e.deadline,
                tls_context=ctx,
            )
        for i, w in enumerate(r.webhooks):
            out[f"{r.name}/webhook/{i}"] = WebhookSender(
                url=w.url,
                client=http,
                secret=w.secret.get_secret_value() if w.secret else None,
                slack_compatible=w.slack_compatible,
                timeout=w.timeout,
            )
    return out


def rule_settings(settings: Settings) -> RuleSettings:
    r = settings.alerting.rules
    return RuleSettings(
        thrash_count=r.thrash_count,
        thrash_window=r.thrash_window,
        gang_stall_after=r.gang_stall_after,
        unreachable_after=r.unreachable_after,
        inversion_tiers=frozenset(r.inversion_tiers),
        status_url=settings.server.external_url,
        dashboard_url=settings.server.dashboard_url,
        disabled=frozenset(r.disabled),
    )


def alerts_for_snapshot(
    snapshot: QueueSnapshot,
    settings: Settings,
    now: float,
    *,
    state: ClusterState | None = None,
    tiers: TierPolicy | None = None,
) -> list[dict[str, Any]]:
    """Return the alerts the rules raise at `now` (ignoring `for`, silences and inhibition), for `analyze`."""
    tiers = tiers or settings.tier_policy()
    inp = RuleInput(
        snapshot=snapshot,
        now=now,
        tiers=tiers,
        settings=rule_settings(settings),
        holders=gpu_holders(state, tiers) if state is not None else (),
    )
    return [
        {
            "rule": c.alertname,
            "severity": c.severity,
            "labels": dict(c.labels),
            "summary": c.annotations.get("summary", ""),
        }
        for c in evaluate_rules(inp)
    ]


class AlertingService:
    def __init__(
        self,
        *,
        settings: Settings,
        store: AlertStore,
        metrics: AlertingMetrics | None = None,
        health: Callable[[], Mapping[str, object]] | None = None,
        cluster: Callable[[], ClusterState | None] | None = None,
        gpu_alerts: Callable[[], Sequence[GpuAlert]] | None = None,
        new_id: Callable[[], str] = lambda: str(uuid.uuid4()),
    ) -> None:
        cfg = settings.alerting
        self.cfg = cfg
        self.tiers = settings.tier_policy()
        self.rule_settings = rule_settings(settings)
        self.external_url = settings.server.external_url
        self.lifecycle = cfg.rules.lifecycle(cfg.resolved_retention)
        self.inhibit_rules = cfg.inhibitions()
        self.integrations = integrations(cfg)
        self.integration_configs = integration_configs(cfg)
        self._receivers_checked = False
        self._on_enqueued: Callable[[], None] | None = None
        self.store = store
        self.metrics = metrics
        self.health = health
        self.cluster = cluster
        self.gpu_alerts = gpu_alerts  # GpuUsageService.alerts, when Prometheus is configured
        self.new_id = new_id
        self.dispatcher = Dispatcher(cfg.route_tree())
        self.alerts: dict[str, TrackedAlert] = {a.fingerprint: a for a in store.load_alerts()}
        # fingerprint → the `last_seen` last written to the store
        self._saved_seen: dict[str, float] = {fp: a.last_seen for fp, a in self.alerts.items()}
        self._restored = False
        self._unhealthy_since: float | None = None
        self._wake = asyncio.Event()
        self._evaluating = asyncio.Lock()
        self._flushing = asyncio.Lock()
        self.last_snapshot_at: float | None = None

    # ---- one evaluation -----------------------------------------------------------------------------

    async def on_snapshot(self, snapshot: QueueSnapshot, now: float) -> None:
        """Evaluate a snapshot, then hand on the groups that are due.

        The rules, the lifecycle and the store write run in a worker thread: for a storm of 10,000 alerts
        they take a good part of a second, during which the API, the flushes and the deliveries must go
        on. What they read is immutable (the snapshot, the alerts before) or gathered here first (cluster
        state, health); what they produce is applied back here, on the loop.
        """
        async with self._evaluating:
            inp = self._rule_input(snapshot, now)
            before = self.alerts
            after, changes = await asyncio.to_thread(self._advance_and_save, inp, before)
            self._apply(after, changes, now)
        await self.flush(now)

    def evaluate(self, snapshot: QueueSnapshot, now: float) -> None:
        """Run the rules and move every alert along its lifecycle; changes are saved before anything is sent."""
        after, changes = self._advance_and_save(self._rule_input(snapshot, now), self.alerts)
        self._apply(after, changes, now)

    def _rule_input(self, snapshot: QueueSnapshot, now: float) -> RuleInput:
        if not self._receivers_checked:
            self.enable_changed_receivers(now)
            self._receivers_checked = True
        state = self.cluster() if self.cluster is not None else None
        return RuleInput(
            snapshot=snapshot,
            now=now,
            tiers=self.tiers,
            settings=self.rule_settings,
            holders=gpu_holders(state, self.tiers) if state is not None else (),
            health=self._watch_health(now),
            gone_receivers=self.store.disabled(),
            gpu_alerts=self.gpu_alerts() if self.gpu_alerts is not None else (),
        )

    def _advance_and_save(
        self, inp: RuleInput, before: Mapping[str, TrackedAlert]
    ) -> tuple[dict[str, TrackedAlert], list[Transition]]:
        after, changes = advance(before, evaluate_rules(inp), now=inp.now, policy=self.lifecycle)
        gone = [fp for fp in before if fp not in after]
        self.store.save_alerts(
            [a for a in after.values() if self._worth_saving(before.get(a.fingerprint), a)], gone
        )
        for fp in gone:
            self._saved_seen.pop(fp, None)
        self.dispatcher.place(after.values())
        return after, changes

    def _apply(self, after: dict[str, TrackedAlert], changes: list[Transition], now: float) -> None:
        if not self._restored:
            # After a restart, the groups are rebuilt from the stored alerts; the notification log keeps
            # them from re-sending what was already sent.
            self.dispatcher.ingest(self.alerts.values(), now=now)
            self._restored = True
        self.alerts = after
        self.last_snapshot_at = now
        resolved_now = [t.alert for t in changes if t.alert.state is AlertState.RESOLVED]
        self.dispatcher.ingest(
            [a for a in after.values() if a.state is AlertState.FIRING] + resolved_now, now=now
        )
        if self.metrics is not None:
            self.metrics.firing.clear()
            counts: dict[tuple[str, str], int] = {}
            for a in after.values():
                if a.state is AlertState.FIRING:
                    k = (a.alertname, a.severity)
                    counts[k] = counts.get(k, 0) + 1
            for (n, sev), c in counts.items():
                self.metrics.firing.labels(n, sev).set(c)
        self._wake.set()

    def _worth_saving(self, old: TrackedAlert | None, new: TrackedAlert) -> bool:
        """Return True when the stored copy of an alert must be rewritten.

        Every tick refreshes `last_seen` and the annotations (the wait grows), and rewriting 10,000 rows a
        tick for that is what made a storm slow. What a restart needs is the state and its times; the
        annotations come back with the first evaluation, and `last_seen` is kept fresh to within
        LAST_SEEN_SLACK, which is all `keep_firing_for` can lose across a restart.
        """
        saved = self._saved_seen.get(new.fingerprint)
        must = (
            old is None
            or saved is None
            or old.state is not new.state
            or old.active_at != new.active_at
            or old.fired_at != new.fired_at
            or old.resolved_at != new.resolved_at
            or new.last_seen - saved >= LAST_SEEN_SLACK
        )
        if must:
            self._saved_seen[new.fingerprint] = new.last_seen
        return must

    def _watch_health(self, now: float) -> WatchHealth | None:
        if self.health is None:
            return None
        try:
            h = self.health()
        except Exception as e:  # a broken health report must not stop alerting
            log.warning("watch health unavailable: %s", e)
            return None
        if h.get("healthy", True):
            self._unhealthy_since = None
            return WatchHealth()
        since = self._unhealthy_since if self._unhealthy_since is not None else now
        stale = h.get("stale_seconds")
        if isinstance(stale, int | float):
            since = min(since, now - float(stale))
        self._unhealthy_since = since
        detail = f"stale for {stale}s" if stale is not None else "the watch reports unhealthy"
        return WatchHealth(since, detail)

    # ---- groups → outbox ----------------------------------------------------------------------------

    def muted(self, now: float) -> dict[str, list[str]]:
        """Return fingerprint → why it is muted ("silence:<id>", "inhibited:<fp>") for alerts that are."""
        sil = self.store.silences()
        out: dict[str, list[str]] = {}
        for fp, src in inhibited(self.alerts.values(), self.inhibit_rules).items():
            out.setdefault(fp, []).append(f"inhibited:{src}")
        for a in self.alerts.values():
            ids = silenced_by(a.labels, sil, now)
            if ids:
                out.setdefault(a.fingerprint, []).extend(f"silence:{i}" for i in ids)
        return out

    def next_flush_at(self) -> float | None:
        return self.dispatcher.next_due()

    def flush_due(self, now: float) -> int:
        """Hand the groups whose time has come to the outbox; return how many messages were stored."""
        flushes = self.dispatcher.due(now=now)
        if not flushes:
            return 0
        stored = self._enqueue(flushes, now)
        for f in flushes:
            self.dispatcher.flushed(f)
        return stored

    async def flush(self, now: float) -> int:
        """As flush_due, with the payloads built and stored in a worker thread (a storm's groups hold
        10,000 alerts, megabytes of JSON)."""
        async with self._flushing:
            flushes = self.dispatcher.due(now=now)
            if not flushes:
                return 0
            muted = await asyncio.to_thread(self.muted, now)
            stored = 0
            # Group by group, each in its own transaction, telling the worker as each lands: in a storm the
            # first group goes out while the others are still being built.
            for f in flushes:
                n = await asyncio.to_thread(self._enqueue, [f], now, muted)
                self.dispatcher.flushed(f)
                stored += n
                if n and self._on_enqueued is not None:
                    self._on_enqueued()
            return stored

    def _enqueue(self, flushes: list[Flush], now: float, muted: Mapping[str, list[str]] | None = None) -> int:
        if muted is None:
            muted = self.muted(now)
        items: list[tuple[OutboxMessage | None, str, str, NotifyEntry]] = []
        for f in flushes:
            live = [a for a in f.alerts if a.fingerprint not in muted]
            firing = frozenset(a.fingerprint for a in live if a.state is AlertState.FIRING)
            resolved = frozenset(a.fingerprint for a in live if a.state is AlertState.RESOLVED)
            # The integrations of a receiver get the same body: built once per group (and per choice of
            # send_resolved), not once per email address and webhook.
            payloads: dict[bool, dict[str, Any]] = {}
            for integ in self.integrations.get(f.route.receiver, []):
                entry = self.store.nflog(integ.id, f.key)
                if not needs_update(
                    entry,
                    firing,
                    resolved,
                    now=now,
                    repeat_interval=f.route.repeat_interval,
                    send_resolved=integ.send_resolved,
                ):
                    continue
                shown = [a for a in live if a.state is AlertState.FIRING or integ.send_resolved]
                msg: OutboxMessage | None = None
                if shown:
                    payload = payloads.get(integ.send_resolved)
                    if payload is None:
                        payload = payloads[integ.send_resolved] = webhook_payload(
                            receiver=integ.receiver,
                            group_key=f.key,
                            group_labels=f.labels,
                            alerts=shown,
                            external_url=self.external_url,
                        )
                    msg = OutboxMessage(
                        id=0,
                        key=idempotency_key(integ.id, f.key, now, firing | resolved),
                        integration=integ.id,
                        group_key=f.key,
                        payload=payload,
                        created=now,
                        next_attempt=now,
                    )
                items.append((msg, integ.id, f.key, NotifyEntry(firing, resolved, now)))
        return self.store.enqueue(items)

    async def run(self, clock: Clock, *, on_enqueued: Callable[[], None] | None = None) -> None:
        """Flush groups when they are due, until cancelled."""
        self._on_enqueued = on_enqueued
        while True:
            now = clock.now()
            if await self.flush(now) and on_enqueued is not None:
                on_enqueued()
            nxt = self.next_flush_at()
            wait = 5.0 if nxt is None else min(5.0, max(0.0, nxt - clock.now()))
            self._wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._wake.wait(), timeout=wait)

    # ---- silences and listing (the API) -------------------------------------------------------------

    def add_silence(
        self,
        *,
        matchers: list[Matcher],
        starts_at: float,
        ends_at: float,
        created_by: str,
        comment: str,
        now: float,
    ) -> Silence:
        s = new_silence(
            id=self.new_id(),
            matchers=matchers,
            starts_at=starts_at,
            ends_at=ends_at,
            created_by=created_by,
            comment=comment,
            now=now,
        )
        self.store.put_silence(s)
        return s

    def expire_silence(self, silence_id: str, now: float) -> Silence | None:
        for s in self.store.silences():
            if s.id == silence_id:
                done = expire(s, now)
                self.store.put_silence(done)
                self._wake.set()
                return done
        return None

    def silences(self) -> list[Silence]:
        return self.store.silences()

    # ---- receivers --------------------------------------------------------------------------------------

    def enable_changed_receivers(self, now: float) -> list[str]:
        """Enable again the integrations disabled under a configuration that has changed since (or that
        no longer exist); return their ids. A fixed URL should not wait for someone to call the API."""
        out = []
        for d in self.store.disabled_details():
            if self.integration_configs.get(d.integration) != d.config:
                self.store.enable(d.integration, now)
                log.info("%s: configuration changed since it was disabled; enabled again", d.integration)
                out.append(d.integration)
        return out

    def receivers(self) -> list[tuple[str, list[tuple[Integration, DisabledIntegration | None]]]]:
        """Return each receiver with its integrations and, for a disabled one, why and since when."""
        off = {d.integration: d for d in self.store.disabled_details()}
        return [(name, [(i, off.get(i.id)) for i in lst]) for name, lst in self.integrations.items()]

    def enable_receiver(self, name: str, now: float) -> list[str] | None:
        """Deliver again to a receiver's disabled integrations; return the ids enabled, None if there is
        no such receiver."""
        if name not in self.integrations:
            return None
        off = self.store.disabled()
        done = [i.id for i in self.integrations[name] if i.id in off and self.store.enable(i.id, now)]
        if done:
            log.info("receiver %s enabled again: %s", name, ", ".join(done))
            if self._on_enqueued is not None:
                self._on_enqueued()  # its held-back messages are pending again
        return done

    def listed_alerts(self, now: float) -> list[tuple[TrackedAlert, list[str]]]:
        """Return every known alert (pending, firing, recently resolved) with why it is muted, if it is."""
        muted = self.muted(now)
        order = {"critical": 0, "warning": 1}
        return [
            (a, muted.get(a.fingerprint, []))
            for a in sorted(
                self.alerts.values(),
                key=lambda a: (
                    a.state is AlertState.RESOLVED,
                    order.get(a.severity, 2),
                    a.active_at,
                    a.fingerprint,
                ),
            )
        ]


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
    ) -> None:
        self.store, self.senders, self.clock, self.metrics, self.rnd = store, senders, clock, metrics, rnd
        self.delivery = cfg.delivery
        self.configs = integration_configs(cfg)
        self.wake = asyncio.Event()

    async def drain(self) -> int:
        """Attempt every message that is due, integrations side by side; return the attempts made."""
        made = 0
        while True:
            heads = self.store.due(self.clock.now())
            if not heads:
                break
            results = await asyncio.gather(*(self._attempt(m) for m in heads))
            made += len(heads)
            if not any(results):
                break  # every head failed and waits for its backoff
        if self.metrics is not None:
            self.metrics.observe_outbox(self.store, self.clock.now())
        return made

    async def _attempt(self, msg: OutboxMessage) -> bool:
        """Try one message; return True if the integration may go on to its next message now."""
        now = self.clock.now()
        sender = self.senders.get(msg.integration)
        if sender is None:
            self.store.failed(msg.id, "no such integration in the configuration any more")
            self._count("failed", msg.integration)
            return True
        self.store.begin_attempt(msg.id, now)
        try:
            res = await sender.send(msg, now=now)
        except Exception as e:  # a sender bug must not kill the worker; the message is retried
            log.exception("sender for %s failed", msg.integration)
            res = DeliveryResult(Outcome.RETRY, f"{type(e).__name__}: {e}")
        done = self.clock.now()
        if res.outcome is Outcome.SENT:
            self.store.delivered(msg.id, done)
            self._count("sent", msg.integration)
            return True
        if res.outcome is Outcome.GONE:
            log.warning("%s answered 410 Gone: disabled (%s)", msg.integration, res.detail)
            self.store.disable(
                msg.integration,
                f"410 Gone at {msg.integration}: {res.detail}",
                done,
                config=self.configs.get(msg.integration, ""),
            )
            self._count("failed", msg.integration)
            return False
        if res.outcome is Outcome.REJECTED or msg.attempts + 1 >= self.delivery.max_attempts:
            log.warning("giving up %s to %s: %s", msg.key, msg.integration, res.detail)
            self.store.failed(msg.id, res.detail)
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
        self.store.retry_at(msg.id, done + delay, res.detail)
        self._count("retried", msg.integration)
        return False

    def _count(self, what: str, integration: str) -> None:
        if self.metrics is not None:
            getattr(self.metrics, what).labels(integration).inc()

    async def run(self) -> None:
        """Deliver until cancelled; sleeps until the next attempt is due or `wake` is set."""
        while True:
            await self.drain()
            nxt = self.store.next_attempt_at()
            wait = 5.0 if nxt is None else min(5.0, max(0.05, nxt - self.clock.now()))
            self.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.wake.wait(), timeout=wait)
