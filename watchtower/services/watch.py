"""The live use case: a cluster source feeds the state, a tick evaluates the queue and hands it on.

`Watcher` owns one `ClusterState`. A `ClusterSource` (the Kubernetes adapter or the simulator) pushes
objects into `on_list` / `on_change`; what newly happened becomes metrics. Every `evaluate_every` the queue
(the waiting workloads) is evaluated, cached as a `Picture` for the API and passed to the snapshot consumers
(alerting, ...). A running workload's status is worked out on demand (`status_of`, `find`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import gc
import logging
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import msgspec
from apscheduler.schedulers.asyncio import AsyncIOScheduler

from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.adapters.metrics import FeedHealth, QueueGauges, WatchtowerMetrics
from watchtower.config.model import Settings
from watchtower.domain.disruptions import Preemption
from watchtower.domain.messages import NO_NODES
from watchtower.domain.queue import QueueEvaluator, QueueSnapshot, WorkloadState, WorkloadStatus
from watchtower.domain.state import (
    ClusterState,
    Happening,
    PodScheduled,
    PodStarted,
    PreemptionSeen,
)
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import Clock

from .ingest import KINDS, Ingestor, Skipped
from .queue_view import preemption_dict

log = logging.getLogger(__name__)

SnapshotConsumer = Callable[[QueueSnapshot, float], Awaitable[None]]
HealthProbe = Callable[[], Mapping[str, Any]]


@dataclass(frozen=True, slots=True)
class Picture:
    """One evaluation, immutable: what the API and the status page read between two ticks."""

    snapshot: QueueSnapshot
    preemptions: tuple[dict[str, Any], ...]  # queue_view.preemption_dict shapes, newest first
    quota: tuple[dict[str, Any], ...]
    duration: float  # seconds the evaluation took
    # Running workloads are not evaluated each tick (they are most of a big cluster): only counted per tier.
    running_by_tier: Mapping[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class _KindFeed:
    listed_at: float | None = None
    listed_objects: int = 0
    last_change: float | None = None
    changes: int = 0


@dataclass(frozen=True, slots=True)
class Readiness:
    ready: bool
    problems: tuple[str, ...]
    detail: dict[str, Any] = field(default_factory=dict)


def feed_health_of(health: Mapping[str, Any]) -> FeedHealth:
    """Read a source's health() dict: overall `stale_seconds`, per kind `restarts` and `stale_seconds`.

    Per-kind entries may sit under "kinds" or at the top level under the kind's name; missing numbers are
    simply not reported.
    """
    kinds = health.get("kinds")
    per_kind: Mapping[str, Any] = kinds if isinstance(kinds, Mapping) else health
    restarts: dict[str, int] = {}
    stale: dict[str, float] = {}
    for kind, info in per_kind.items():
        if not isinstance(info, Mapping):
            continue
        r = info.get("restarts")
        if isinstance(r, int | float) and not isinstance(r, bool):
            restarts[str(kind)] = int(r)
        s = info.get("stale_seconds")
        if isinstance(s, int | float) and not isinstance(s, bool):
            stale[str(kind)] = float(s)
    overall = health.get("stale_seconds")
    if not isinstance(overall, int | float) or isinstance(overall, bool):
        overall = max(stale.values()) if stale else None
    return FeedHealth(restarts=restarts, staleness=stale, stale_seconds=overall)


def main_reason(w: WorkloadStatus) -> str:
    """Return a bounded label for why a workload waits: the reason most nodes gave, or the state's."""
    if w.state is WorkloadState.QUOTA_BLOCKED:
        return "quota"
    d = w.diagnosis
    if d is None:
        return "not_tried"
    if d.reasons:
        top = max(d.reasons, key=lambda r: (r.nodes, r.reason))
        return top.reason if len(top.reason) <= 64 else "other"
    if d.raw.startswith(NO_NODES):
        return "no_nodes"
    return "other"


class Watcher:
    """The live picture of one cluster: state, ingest, evaluation tick, metrics and snapshot consumers."""

    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        metrics: WatchtowerMetrics,
        source_health: HealthProbe,
        stale_after: float = 120.0,
        attribution_grace: float = 120.0,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.source_health = source_health
        self.stale_after = stale_after
        # A victim's condition usually arrives before the scheduler's Preempted event that names the
        # preemptor: wait this long (cluster time) for the event before counting it as "unknown".
        self.attribution_grace = attribution_grace
        self.policy = settings.queue_policy()
        self.state = ClusterState()
        self.decoder = ObjectDecoder(
            team_label=settings.teams.label,
            keep_labels=frozenset(settings.training.match_labels),
            keep_annotations=frozenset(settings.display.annotations),
        )
        self.ingestor = Ingestor(self.state, self.decoder, on_skip=self._skipped)
        self.evaluator = QueueEvaluator(self.policy)
        self.consumers: list[SnapshotConsumer] = []
        self.picture: Picture | None = None
        self.feeds: dict[str, _KindFeed] = {k: _KindFeed() for k in KINDS}
        # Sources may call the sinks from a worker thread; evaluation reads the same dicts.
        self._lock = threading.RLock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ticking = asyncio.Lock()  # a kick and the scheduled tick must not hand out snapshots at once
        self._awaiting_attribution: dict[str, tuple[Preemption, float]] = {}
        self._counted: dict[str, float] = {}  # victim uid → when counted, so a replay never counts twice
        # Running workloads per tier, for the page: recounted every `running_every` real seconds.
        self.running_every = 30.0
        self._running: dict[str, int] = {}
        self._running_at: float | None = None
        self._keep = max(
            self.policy.preemption_window, self.policy.thrash_window, self.policy.quota_window, 3600.0
        )

    # ---- sinks for a ClusterSource --------------------------------------------------------------------

    def on_list(
        self, kind: str, items: Sequence[msgspec.Raw], *, first: bool = True, last: bool = True
    ) -> None:
        with self._lock:
            happenings = self.ingestor.list_page(kind, items, first=first, last=last)
            feed = self.feeds.setdefault(kind, _KindFeed())
            feed.listed_objects = len(items) if first else feed.listed_objects + len(items)
            self._observe(happenings)
            if not last:
                return
            initial = feed.listed_at is None
            feed.listed_at = self.clock.now()
        if initial and self.listed_all():
            # The listed objects live as long as the service: frozen, full collections stop walking them.
            gc.freeze()
            self._kick()

    def on_change(self, kind: str, event_type: str, raw: msgspec.Raw | bytes) -> None:
        with self._lock:
            happenings = self.ingestor.apply(kind, event_type, raw)
            feed = self.feeds.setdefault(kind, _KindFeed())
            feed.last_change = self.clock.now()
            feed.changes += 1
            self._observe(happenings)

    def listed_all(self) -> bool:
        return all(self.feeds[k].listed_at is not None for k in KINDS)

    def _skipped(self, s: Skipped) -> None:
        self.metrics.skipped.labels(s.kind).inc()

    # ---- happenings → metrics ---------------------------------------------------------------------------

    def _observe(self, happenings: Iterable[Happening]) -> None:
        tiers = self.policy.tiers
        m = self.metrics
        for h in happenings:
            if isinstance(h, PodScheduled):
                if h.pod.gpus > 0:
                    tier = tiers.tier_of(h.pod.priority, h.pod.priority_class).name
                    m.time_to_schedule.labels(tier).observe(h.wait)
            elif isinstance(h, PodStarted):
                if h.pod.gpus > 0:
                    tier = tiers.tier_of(h.pod.priority, h.pod.priority_class).name
                    m.startup.labels(tier).observe(h.latency)
            elif isinstance(h, PreemptionSeen):
                self._preemption_seen(h.preemption)

    def _preemption_seen(self, p: Preemption) -> None:
        uid = p.victim_uid
        if uid in self._counted:
            return
        if p.preemptor_uid or p.preemptor_name:
            self._awaiting_attribution.pop(uid, None)
            self._count_preemption(p)
        else:
            since = self._awaiting_attribution.get(uid, (p, self.clock.now()))[1]
            self._awaiting_attribution[uid] = (p, since)

    def _count_preemption(self, p: Preemption) -> None:
        tiers = self.policy.tiers
        victim_tier = (
            tiers.tier_of(p.victim_priority, p.victim_priority_class).name
            if p.victim_priority is not None
            else "unknown"
        )
        preemptor_tier = "unknown"
        if p.preemptor_priority is not None:
            preemptor_tier = tiers.tier_of(p.preemptor_priority).name
        else:
            pod = self.state.pods.get(p.preemptor_uid) if p.preemptor_uid else None
            if pod is not None:
                preemptor_tier = tiers.tier_of(pod.priority, pod.priority_class).name
        self.metrics.preemptions.labels(victim_tier, preemptor_tier).inc()
        lost = p.gpu_hours_lost
        if lost:
            self.metrics.gpu_hours_lost.labels(victim_tier, preemptor_tier).inc(lost)
        self._counted[p.victim_uid] = self.clock.now()

    def _settle_attribution(self, now: float) -> None:
        for uid, (p, since) in list(self._awaiting_attribution.items()):
            latest = self.state.preemptions.get(uid, p)
            if latest.preemptor_uid or latest.preemptor_name or now - since >= self.attribution_grace:
                del self._awaiting_attribution[uid]
                if uid not in self._counted:
                    self._count_preemption(latest)

    # ---- evaluation -------------------------------------------------------------------------------------

    def evaluate(self, now: float) -> Picture:
        """Evaluate the queue at `now`, publish it for the API and the metrics, and return it."""
        started = time.perf_counter()
        with self._lock:
            snap = self.evaluator.evaluate(self.state, now=now)
            mono = time.monotonic()
            if self._running_at is None or mono - self._running_at >= self.running_every:
                self._running, self._running_at = self._running_by_tier(snap), mono
            running = self._running
            tiers = self.policy.tiers
            preemptions = tuple(preemption_dict(p, tiers, self.state) for p in snap.preemptions)
            quota = tuple(
                {
                    "namespace": q.namespace,
                    "name": q.name,
                    "team": self.state.team_of(q.namespace),
                    "gpus_hard": q.hard_gpus,
                    "gpus_used": q.used_gpus,
                }
                for q in sorted(self.state.quotas.values(), key=lambda q: (q.namespace, q.name))
                if q.hard_gpus is not None
            )
            self._settle_attribution(now)
            self.metrics.set_queue(self._gauges(snap))
        duration = time.perf_counter() - started
        self.metrics.evaluation.observe(duration)
        picture = Picture(snap, preemptions, quota, duration, running)
        self.picture = picture
        return picture

    def _running_by_tier(self, snap: QueueSnapshot) -> dict[str, int]:
        """Count running workloads per tier from one bound training pod each: a dict walk, not an evaluation.

        Still ~0.7 s over 137,000 workloads (150,000 pods), hence refreshed every `running_every` seconds only.
        """
        tiers, selector = self.policy.tiers, self.policy.selector
        listed = {w.key for w in snap.workloads}
        pods = self.state.pods
        out = dict.fromkeys((t.name for t in tiers.tiers), 0)
        tier_memo: dict[tuple[int, str], str] = {}
        for key, members in self.state.by_workload.items():
            if key in listed:
                continue
            for uid in members:
                p = pods.get(uid)
                if p is not None and p.holds_resources and not p.terminal and selector.matches(p):
                    k = (p.priority, p.priority_class)
                    tier = tier_memo.get(k)
                    if tier is None:
                        tier = tier_memo[k] = tiers.tier_of(p.priority, p.priority_class).name
                    out[tier] = out.get(tier, 0) + 1
                    break
        return out

    def status_of(self, key: WorkloadKey, now: float | None = None) -> WorkloadStatus | None:
        """Return one workload's status now (running ones included), computed on demand."""
        with self._lock:
            return self.evaluator.status_of(self.state, key, now=self.clock.now() if now is None else now)

    def find(self, namespace: str, name: str, now: float | None = None) -> list[WorkloadStatus]:
        """Return the statuses of every tracked workload called namespace/name (of any kind), on demand."""
        at = self.clock.now() if now is None else now
        with self._lock:
            keys = [k for k in self.state.by_workload if k.name == name and k.namespace == namespace]
            keys += [
                k
                for k in self.state.quota_refusals
                if k.name == name and k.namespace == namespace and k not in keys
            ]
            found = (self.evaluator.status_of(self.state, k, now=at) for k in sorted(keys))
            return [st for st in found if st is not None]

    def with_statuses(
        self, snapshot: QueueSnapshot, names: Iterable[tuple[str, str]], now: float | None = None
    ) -> QueueSnapshot:
        """Return the snapshot with the statuses of these (namespace, name) workloads added if absent.

        For consumers that must see a few running workloads (the GPU-usage service's idle holders).
        """
        have = {(w.namespace, w.name) for w in snapshot.workloads}
        extra = [st for ns, n in set(names) if (ns, n) not in have for st in self.find(ns, n, now)]
        if not extra:
            return snapshot
        return dataclasses.replace(snapshot, workloads=(*snapshot.workloads, *extra))

    def _gauges(self, snap: QueueSnapshot) -> QueueGauges:
        tier_names = [t.name for t in self.policy.tiers.tiers]
        pending: dict[tuple[str, str, str], int] = {}
        oldest = dict.fromkeys(tier_names, 0.0)
        partial = dict.fromkeys(tier_names, 0)
        partial_gpus = dict.fromkeys(tier_names, 0)
        for w in snap.workloads:
            if not w.waiting:
                continue
            key = (w.tier, w.namespace, main_reason(w))
            pending[key] = pending.get(key, 0) + 1
            oldest[w.tier] = max(oldest.get(w.tier, 0.0), w.wait_seconds)
            if w.state is WorkloadState.PARTIAL and w.gang:
                partial[w.tier] = partial.get(w.tier, 0) + 1
                partial_gpus[w.tier] = partial_gpus.get(w.tier, 0) + w.gpus_held
        quotas = [q for q in self.state.quotas.values() if q.hard_gpus is not None]
        return QueueGauges(
            pending=pending,
            oldest_wait=oldest,
            partial_gangs=partial,
            partial_gang_gpus=partial_gpus,
            quota_used={(q.namespace, q.name): q.used_gpus or 0 for q in quotas},
            quota_hard={(q.namespace, q.name): q.hard_gpus or 0 for q in quotas},
            gated_pods=snap.gated_pods,
            fragmented_workloads=len(snap.fragmentation),
            gpus_allocatable=snap.capacity.allocatable,
            gpus_used=snap.capacity.used,
            evaluated_at=snap.at,
        )

    def prune(self, now: float) -> None:
        with self._lock:
            self.state.prune(now=now, keep_seconds=self._keep)
            horizon = now - self._keep
            for uid in [u for u, t in self._counted.items() if t < horizon]:
                del self._counted[uid]

    async def tick(self) -> Picture:
        """One evaluation tick: evaluate, prune, then hand the snapshot to every consumer."""
        async with self._ticking:
            now = self.clock.now()
            picture = self.evaluate(now)
            self.prune(now)
            for consumer in list(self.consumers):
                try:
                    await consumer(picture.snapshot, now)
                except Exception:
                    name = getattr(consumer, "__qualname__", type(consumer).__name__)
                    log.exception("snapshot consumer %s failed", name)
                    self.metrics.consumer_failures.labels(name).inc()
            return picture

    # ---- scheduling -------------------------------------------------------------------------------------

    def schedule(self, scheduler: AsyncIOScheduler) -> None:
        """Add the evaluation tick to a scheduler that runs on the current event loop."""
        self._loop = asyncio.get_running_loop()
        scheduler.add_job(
            self.tick,
            "interval",
            seconds=self.settings.queue.evaluate_every,
            id="watchtower-evaluate",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )

    def _kick(self) -> None:
        """Evaluate now rather than at the next tick: the first full picture just became available."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(lambda: loop.create_task(self.tick()))

    # ---- readiness --------------------------------------------------------------------------------------

    def readiness(self) -> Readiness:
        """Return whether the picture is complete and fresh, with per-kind detail saying how stale."""
        now = self.clock.now()
        health = dict(self.source_health())
        feed = feed_health_of(health)
        problems: list[str] = []
        kinds: dict[str, Any] = {}
        source_kinds = health.get("kinds") if isinstance(health.get("kinds"), Mapping) else health
        for kind in KINDS:
            f = self.feeds.get(kind, _KindFeed())
            info: dict[str, Any] = {
                "listed": f.listed_at is not None,
                "objects_at_list": f.listed_objects,
                "changes": f.changes,
                "seconds_since_change": round(now - f.last_change, 3) if f.last_change is not None else None,
                "stale_seconds": feed.staleness.get(kind),
                "restarts": feed.restarts.get(kind, 0),
            }
            src = source_kinds.get(kind) if isinstance(source_kinds, Mapping) else None
            if isinstance(src, Mapping):
                info["source"] = {
                    k: v for k, v in src.items() if isinstance(v, str | int | float | bool | None)
                }
            kinds[kind] = info
            if f.listed_at is None:
                problems.append(f"{kind}: not listed yet")
            s = feed.staleness.get(kind)
            if s is not None and s > self.stale_after:
                problems.append(f"{kind}: no contact with the API server for {s:.0f}s")
        if health.get("healthy") is False:
            problems.append("the cluster source reports itself unhealthy")
        if feed.stale_seconds is not None and feed.stale_seconds > self.stale_after:
            problems.append(f"picture is {feed.stale_seconds:.0f}s stale (limit {self.stale_after:.0f}s)")
        pic = self.picture
        detail: dict[str, Any] = {
            "stale_seconds": feed.stale_seconds,
            "stale_after_seconds": self.stale_after,
            "evaluated_at": pic.snapshot.at if pic is not None else None,
            "skipped_objects": dict(self.ingestor.skipped),
            "kinds": kinds,
        }
        return Readiness(not problems, tuple(problems), detail)
