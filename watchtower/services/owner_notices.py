"""Owner notices: each tick, what a waiting workload's owner must hear → the alert outbox.

The leader runs it after the alerts (`Alerting.on_tick`). A notice's message keys come from the notice's
episode, its owner and its integration, and are recorded once (`AlertStore.enqueue_once`): a restart or a
new leader derives the same notices again and stores none twice; the delivery worker sends them as any
notification, with the same key on every attempt. The rate-limit ledger of each owner is kept in the
notification log (`nflog`), so a new leader starts from the old one's counts.

Size: one tick's derivation (threshold, never, started, preempted) and its storing (rate limits, digests,
silences, the outbox) share the service's memory of what was handled; apart, each would need all of it.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from prometheus_client import CollectorRegistry

from watchtower.config.model import Settings
from watchtower.domain.alerts.integration import Integration
from watchtower.domain.alerts.notify import NotifyEntry
from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.domain.alerts.silences import silenced_by
from watchtower.domain.owners.notices import (
    Digest,
    Ledger,
    Limits,
    Notice,
    QuotaView,
    decide,
    digest_due,
    never_notice,
    never_start_reason,
    preempted_notice,
    record_send,
    started_notice,
    threshold_notice,
)
from watchtower.domain.owners.payload import digest_payload, notice_payload
from watchtower.domain.owners.resolve import (
    NOTIFY_ANNOTATION,
    Owner,
    OwnerPolicy,
    Resolution,
    resolve_owner,
)
from watchtower.domain.queue_facts import notify_of
from watchtower.domain.queue_values import WorkloadFacts, WorkloadStatus
from watchtower.domain.state import ClusterState
from watchtower.domain.tick import Tick
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import AlertStore
from watchtower.services.alerting.notify import GroupNotifier

from .owner_outbox import LEDGER, OwnerMetrics, lane_of, ledger_entry, ledger_of, load_ledger, message_key

log = logging.getLogger(__name__)

STORE_AT_ONCE = 500  # messages stored in one transaction
LEDGERS_AT_ONCE = 16  # owners without a ledger in memory from which one read of all of them is cheaper


def owner_notifier(
    settings: Settings, state: ClusterState, notifier: GroupNotifier, registry: CollectorRegistry
) -> OwnerNotifier | None:
    """Return the owner notices' service of `settings.owners` (None when off), on the alert notifier's
    store and receivers' integrations (read at each use: a reload replaces them)."""
    owners = settings.owners
    if not owners.enabled:
        return None
    tiers = settings.tier_policy()
    return OwnerNotifier(
        policy=owners.policy(),
        limits=owners.limits(),
        store=notifier.store,
        integrations=lambda: notifier.integrations,
        # As the fairness recorder's: still there while it has pods or its controller exists.
        present=lambda k: k in state.by_workload or state.control.controller(k) is not None,
        tier_of=lambda priority, cls: tiers.tier_of(priority, cls).name,
        tier_rank=tiers.rank,
        team_of=state.team_of,
        notify_of=lambda k: notify_of(state, k),
        external_url=settings.server.external_url,
        preempted_within=owners.preempted_within,
        metrics=OwnerMetrics(registry=registry),
    )


class OwnerNotifier:
    def __init__(
        self,
        *,
        policy: OwnerPolicy,
        limits: Limits,
        store: AlertStore,
        integrations: Callable[[], Mapping[str, list[Integration]]],
        present: Callable[[WorkloadKey], bool],
        tier_of: Callable[[int, str], str],
        team_of: Callable[[str], str],
        tier_rank: Callable[[str], int] = lambda _: 0,  # 0 the highest tier
        notify_of: Callable[[WorkloadKey], str] = lambda _: "",  # a workload's annotation, waiting or not
        external_url: str = "",
        preempted_within: float = 900.0,
        metrics: OwnerMetrics | None = None,
    ) -> None:
        self.policy, self.limits, self.store = policy, limits, store
        self.integrations = integrations
        self.present, self.tier_of, self.team_of, self.tier_rank = present, tier_of, team_of, tier_rank
        self.notify_of = notify_of
        self.external_url = external_url
        self.preempted_within = preempted_within
        self.metrics = metrics
        self._lock = asyncio.Lock()
        self._latest: Tick | None = None
        self._task: asyncio.Task[None] | None = None
        self._clear()

    def reset(self) -> None:
        """Forget what is kept in memory before the next tick: after leading again (or following), the store
        says what was sent meanwhile. A flag, as a step may be running in its thread."""
        self._reset_due = True

    def _clear(self) -> None:
        self._reset_due = False
        self._ledgers: dict[str, Ledger] = {}
        self._owners: dict[str, Owner] = {}
        self._done: set[str] = set()  # notice idents handled (sent, recorded before, muted, ownerless)
        self._pending: dict[str, tuple[Notice, Owner]] = {}  # waiting for their workload's hour
        self._past: dict[WorkloadKey, WorkloadFacts] = {}  # waiting past their threshold at the last tick
        self._refused_seen: set[tuple[WorkloadKey, str]] = set()
        self._resolutions: dict[tuple[str, str, str | None], Resolution] = {}
        self._tick_targets: dict[str, list[str]] = {}
        self._preemptions_seen: set[str] = set()

    async def on_tick(self, tick: Tick) -> int:
        """Derive this tick's notices and store their messages; return how many messages were stored."""
        async with self._lock:
            return await asyncio.to_thread(self.step, tick)

    def start(self, tick: Tick, on_enqueued: Callable[[], None]) -> None:
        """Work out this tick's notices in the background: a storm's 10,000 notices take seconds the tick
        loop (and on-call's notifications) must not wait for. Ticks that come meanwhile are folded into
        the latest (each step looks at the whole queue)."""
        self._latest = tick
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._run(on_enqueued))

    async def settled(self) -> None:
        """Return once the background steps are done (tests, and a way out that waits for them)."""
        while self._task is not None and not self._task.done():
            await asyncio.wait({self._task})

    async def _run(self, on_enqueued: Callable[[], None]) -> None:
        while self._latest is not None:
            tick, self._latest = self._latest, None
            try:
                if await self.on_tick(tick):
                    on_enqueued()
            except Exception:  # counted as the tick's consumers are: logged, the next tick tries again
                log.exception("owner notices failed at %s", tick.at)

    # ---- one tick -----------------------------------------------------------------------------------

    def step(self, tick: Tick) -> int:
        if self._reset_due:
            self._clear()
        now = tick.at
        found: list[tuple[Notice, Owner]] = []
        waiting: dict[WorkloadKey, WorkloadStatus] = {w.key: w for w in tick.snapshot.workloads if w.waiting}
        past_now: dict[WorkloadKey, WorkloadFacts] = {}
        quota = self._quota_views(tick)
        if len(self._done) > 200_000:
            self._done.clear()  # bounded: a notice derived again is found in the store's recorded keys
        for k, w in waiting.items():
            f = w.facts
            never = never_start_reason(f)
            if never and f"never\x00{k}\x00{f.since}" not in self._done:
                self._done.add(f"never\x00{k}\x00{f.since}")
                if (whom := self._owner(f)) is not None:
                    found.append((never_notice(f, never, now=now), whom))
            # Work that can never start was told so: "passed its warning threshold" would say it waits for
            # room. Once the verdict clears, the threshold notice of this wait follows at its real wait.
            if never or f.since is None or w.wait_seconds < f.warn_after:
                continue
            past_now[k] = f
            ident_hint = f"threshold\x00{k}\x00{f.since:.0f}"
            if ident_hint in self._done:
                continue
            self._done.add(ident_hint)
            owner = self._owner(f)
            if owner is None:
                self._count("threshold", "no_owner")
                continue
            q = quota.get(k.namespace)
            if q is not None and tick.holders:
                q = self._own_lower(q, tick, k.namespace, f.tier)
            n = threshold_notice(w, now=now, waits=tick.waits, capacity=tick.snapshot.capacity, quota=q)
            if n is not None:
                found.append((n, owner))
        for k, f in self._past.items():
            if k in waiting or k in past_now or not self.present(k):
                continue  # still waiting (under a new start), or deleted while it waited
            owner = self._owner(f)
            n = started_notice(f, now=now)
            if n is not None and owner is not None:
                found.append((n, owner))
        self._past = past_now
        for p in tick.snapshot.preemptions:
            vk = p.victim_workload
            if vk is None or p.at is None or now - p.at > self.preempted_within:
                continue
            pid = f"{p.victim_uid}@{p.at:.0f}"
            if pid in self._preemptions_seen:
                continue
            self._preemptions_seen.add(pid)
            again = waiting.get(vk)
            team = again.facts.team if again is not None else self.team_of(vk.namespace)
            if again is not None:
                owner = self._owner(again.facts)
            else:
                # Not waiting again: its object's or remaining pods' annotation still names (or opts out) its
                # owner; the team contact only where none does.
                named = self.notify_of(vk)
                owner = self._resolved(vk, vk.namespace, team, {NOTIFY_ANNOTATION: named} if named else {})
            if owner is None:
                self._count("preempted", "no_owner")
                continue
            n = preempted_notice(p, team=team, now=now, waiting_again=again is not None, tier_of=self.tier_of)
            if n is not None:
                found.append((n, owner))
        if len(self._preemptions_seen) > 100_000:
            self._preemptions_seen.clear()  # bounded; an old one is also out of `preempted_within`
        return self._enqueue(found, now)

    def _own_lower(self, q: QuotaView, tick: Tick, namespace: str, tier: str) -> QuotaView:
        """Return the quota with the GPUs its own namespace's lower-tier work holds (the Tick's holders,
        listed while urgent work is stuck)."""
        rank = self.tier_rank(tier)
        own = sum(
            h.gpus
            for h in tick.holders
            if h.workload.namespace == namespace and self.tier_rank(h.tier) > rank
        )
        return QuotaView(q.used, q.hard, own)

    def _quota_views(self, tick: Tick) -> dict[str, QuotaView]:
        return {q.namespace: QuotaView(q.used_gpus, q.hard_gpus) for q in tick.quota}

    def _owner(self, f: WorkloadFacts) -> Owner | None:
        return self._resolved(
            f.key, f.key.namespace, f.team, {NOTIFY_ANNOTATION: f.notify} if f.notify else {}
        )

    def _resolved_cached(
        self, k: WorkloadKey, namespace: str, team: str, annotations: Mapping[str, str]
    ) -> Resolution:
        # Most workloads of a namespace share their owner: resolved once per distinct input.
        ck = (namespace, team, annotations.get(NOTIFY_ANNOTATION))
        r = self._resolutions.get(ck)
        if r is None:
            if len(self._resolutions) > 50_000:
                self._resolutions.clear()
            r = self._resolutions[ck] = resolve_owner(
                namespace=namespace, team=team, annotations=annotations, policy=self.policy
            )
        return r

    def _resolved(
        self, k: WorkloadKey, namespace: str, team: str, annotations: Mapping[str, str]
    ) -> Owner | None:
        r = self._resolved_cached(k, namespace, team, annotations)
        if r.refused is not None and (k, r.detail) not in self._refused_seen:
            if len(self._refused_seen) > 100_000:
                self._refused_seen.clear()  # bounded: a value seen again after this is counted again
            self._refused_seen.add((k, r.detail))
            if self.metrics is not None:
                self.metrics.refused.labels(r.refused).inc()
            log.warning("owner annotation of %s refused (%s): %r", k, r.refused, r.detail)
        if r.opted_out:
            self._count("any", "opted_out")
        if r.owner is not None:
            self._owners.setdefault(r.owner.id, r.owner)
        return r.owner

    def _count(self, kind: str, outcome: str, n: int = 1) -> None:
        if self.metrics is not None and n:
            self.metrics.notices.labels(kind, outcome).inc(n)

    def _ledger(self, owner: str) -> Ledger:
        led = self._ledgers.get(owner)
        if led is None:
            led = self._ledgers[owner] = load_ledger(self.store, owner)
        return led

    def _load_ledgers(self, owners: set[str]) -> None:
        """Read the ledgers of many owners not in memory in one read of the store, not one each."""
        missing = owners - self._ledgers.keys()
        if len(missing) < LEDGERS_AT_ONCE:
            return  # `_ledger` reads the few one by one
        stored = self.store.nflogs(LEDGER)
        for oid in missing:
            self._ledgers[oid] = ledger_of(stored.get(oid))

    def _enqueue(self, found: Iterable[tuple[Notice, Owner]], now: float) -> int:
        self._tick_targets = {}
        waited = list(self._pending.values())
        self._pending = {}
        new = [(n, o) for n, o in found if n.ident not in self._done]
        todo = waited + new
        if not todo and not any(led.held for led in self._ledgers.values()):
            return 0
        silences = self.store.silences()
        # One read of the recorded keys for the whole tick: a notice stored before a restart or by the
        # former leader is done, and its owner's ledger (kept in the store) counted it already.
        # Only the new ones: a waiting notice was looked up when found, and only the leader stores them.
        known = (
            self.store.recorded(message_key(t, n.ident, o.id) for n, o in new for t in self._targets(o))
            if new
            else set()
        )
        self._load_ledgers({o.id for _, o in todo})
        messages: list[OutboxMessage] = []
        touched: set[str] = set()
        sent_notices: list[Notice] = []
        for n, owner in todo:
            if silences and silenced_by(n.labels, silences, now):
                self._done.add(n.ident)
                self._count(n.kind, "silenced")
                continue
            targets = self._targets(owner)
            if not targets or all(message_key(t, n.ident, owner.id) in known for t in targets):
                self._done.add(n.ident)
                continue
            led = self._ledger(owner.id)
            what = decide(led, n, now, self.limits)
            if what == "wait":
                self._pending[n.ident] = (n, owner)
                continue
            self._done.add(n.ident)
            touched.add(owner.id)
            if what == "digest":
                led.held.append(n)
                self._count(n.kind, "digested")
                continue
            payload = notice_payload(n, to=owner.emails, external_url=self.external_url)
            messages += self._messages(owner, n.ident, payload, n, now)
            record_send(led, [n.workload], now)
            sent_notices.append(n)
        for oid, led in self._ledgers.items():
            if digest_due(led, now, self.limits):
                whom = self._owners.get(oid)
                d = Digest(oid, tuple(led.held), now)
                led.held = []
                if whom is None:
                    continue
                msgs = self._messages(
                    whom,
                    d.ident,
                    digest_payload(d, to=whom.emails, external_url=self.external_url),
                    None,
                    now,
                )
                if self._new(msgs):
                    messages += msgs
                    record_send(led, [x.workload for x in d.notices], now)
                    touched.add(oid)
                    self._count("digest", "enqueued")
        ledger_rows: list[tuple[OutboxMessage | None, str, str, NotifyEntry]] = [
            (None, LEDGER, oid, ledger_entry(self._ledgers[oid], now, self.limits)) for oid in sorted(touched)
        ]
        stored = 0
        for i in range(0, len(messages), STORE_AT_ONCE):
            if i:
                # Between two parts the store is free a moment: on-call's flush, due now in a storm, waits
                # for one part, not for all 10,000 (a lock is not fair: without the pause, this thread
                # would take it again at once).
                time.sleep(0.002)
            stored += self.store.enqueue_once(messages[i : i + STORE_AT_ONCE], now)
        if ledger_rows:
            self.store.enqueue(ledger_rows)
        for n in sent_notices:
            self._count(n.kind, "enqueued")
        return stored

    def _new(self, msgs: Sequence[OutboxMessage]) -> bool:
        """True when these messages were never stored (a notice a former leader stored is not again)."""
        return bool(msgs) and not self.store.recorded(m.key for m in msgs)

    def _targets(self, owner: Owner) -> list[str]:
        """Return the integrations an owner's messages go to (kept for one tick: a reload may change them)."""
        hit = self._tick_targets.get(owner.id)
        if hit is not None:
            return hit
        targets: list[str] = self._tick_targets.setdefault(owner.id, [])
        if owner.emails:
            targets.append(lane_of(owner.id))
        if owner.receiver:
            targets += [i.key for i in self.integrations().get(owner.receiver, [])]
        return targets

    def _messages(
        self, owner: Owner, ident: str, payload: dict[str, Any], n: Notice | None, now: float
    ) -> list[OutboxMessage]:
        targets = self._targets(owner)
        group = f"owner:{owner.id}:{n.workload if n is not None else 'digest'}"
        return [
            OutboxMessage(
                id=0,
                key=message_key(t, ident, owner.id),
                integration=t,
                group_key=group,
                payload=payload,
                created=now,
                next_attempt=now,
            )
            for t in targets
        ]
