"""The live use case: a cluster source feeds the state; an evaluation turns it into one immutable Tick.

`QueueTracker` owns one `ClusterState`. A `ClusterSource` (the Kubernetes adapter or the simulator, which
are what watch the cluster) pushes objects into `on_list` / `on_change`; the Ingestor takes them into the
state and what newly happened becomes metrics. `evaluate(now)` returns the `Tick` that TickLoop
(watchtower.runtime) hands on to GPU usage, alerting and the API, with the gauges of queue_gauges.py (their
reason labels from wait_reasons.py). A running workload's status is worked out on demand (`status_of`,
`find`).
"""

from __future__ import annotations

import dataclasses
import gc
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence

import msgspec

from watchtower.config.model import Settings
from watchtower.domain.alerts.holders import HolderIndex, gpus_held_by_node
from watchtower.domain.alerts.rules.priority_inversion import holders_needed_below
from watchtower.domain.change_log import ChangeCursor
from watchtower.domain.entitlement import queue_lines
from watchtower.domain.estimate import ScheduleHistory
from watchtower.domain.forms.dra.tables import DraTables
from watchtower.domain.forms.kueue.facts import HELD as KUEUE_HELD
from watchtower.domain.forms.kueue.queues import kueue_queue_lines
from watchtower.domain.health import SourceHealth
from watchtower.domain.queue import (
    QueueEvaluator,
    QueueSnapshot,
    WorkloadStatus,
)
from watchtower.domain.records import Pod
from watchtower.domain.running import RunningTiers
from watchtower.domain.state import (
    ClusterState,
    DisruptionSeen,
    Happening,
    PodScheduled,
    PodStarted,
    PreemptionSeen,
)
from watchtower.domain.stuck import stuck_heads
from watchtower.domain.tick import QuotaLine, Tick
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import Clock, ObjectDecoder, QueueMetrics

from .feeds import FeedTracker, Readiness
from .ingest import KINDS, Ingestor, Skipped
from .preemption_count import PreemptionCounter
from .queue_figures import ListedFigures
from .queue_gauges import queue_gauges, with_fairness
from .queue_json import form_sections
from .wait_reasons import ReasonLabels

# Change-log entries the holder index may lag behind before the log stops keeping them for it (~3 minutes of
# a 500 events/s feed; a few MiB at most): past that, its next read re-walks the pods, which costs no more.
HOLDER_LAG = 100_000

log = logging.getLogger(__name__)


class QueueTracker:
    """The live picture of one cluster's queue: its state, the ingest into it, feed bookkeeping and the
    evaluation of each tick."""

    def __init__(
        self,
        *,
        settings: Settings,
        clock: Clock,
        metrics: QueueMetrics,
        decoder: ObjectDecoder,
        source_health: Callable[[], SourceHealth],
        on_listed: Callable[[], None] | None = None,
        attribution_grace: float = 120.0,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.metrics = metrics
        self.source_health = source_health
        self.stale_after = settings.cluster.stale_after
        # Called (from whichever thread the source feeds from) once every kind has been listed: the first
        # full picture is there, evaluate it now rather than at the next tick.
        self.on_listed = on_listed
        self.policy = settings.queue_policy()
        self._inversion_tiers = frozenset(settings.alerting.rules.inversion_tiers)
        self._thrash_count = settings.alerting.rules.thrash_count
        self.state = ClusterState(dra=DraTables(gpu_classes=frozenset(settings.gpu.device_classes)))
        self.decoder = decoder
        self.ingestor = Ingestor(self.state, decoder, on_skip=self._skipped)
        self.evaluator = QueueEvaluator(self.policy)
        self.feeds = FeedTracker(KINDS)
        self.preemptions = PreemptionCounter(
            self.policy.tiers, metrics, attribution_grace=attribution_grace, team_of=self.state.team_of
        )
        q = settings.queue
        self.history = ScheduleHistory(window=q.estimate_window, min_samples=q.estimate_min_samples)
        self.stuck_after = q.stuck_after
        self._seeded = False  # the history took the first full list's recent bindings
        self.latest: Tick | None = None
        # Sources may call the sinks from a worker thread; evaluation reads the same dicts.
        self._lock = threading.RLock()
        # Both follow the state's change log: a tick re-derives the workloads touched since the last.
        self._running = RunningTiers(self.policy.tiers, self.policy.selector)
        self._holders = HolderIndex(self.policy.tiers)
        # Readers of the state's change log outside the tracker that read it at every tick (the replay
        # recorder): the log keeps what they have not read yet.
        self.log_readers: list[ChangeCursor] = []
        self._reasons = ReasonLabels()  # the pending gauge's reason labels
        self._listed: ListedFigures | None = None  # what the listed facts give, kept with the order
        self._keep = max(
            self.policy.preemption_window, self.policy.thrash_window, self.policy.quota_window, 3600.0
        )

    # ---- sinks for a ClusterSource --------------------------------------------------------------------

    def on_list(
        self, kind: str, items: Sequence[msgspec.Raw], *, first: bool = True, last: bool = True
    ) -> None:
        with self._lock:
            happenings = self.ingestor.list_page(kind, items, first=first, last=last)
            self.feeds.listed_page(kind, len(items), first=first)
            self._observe(happenings)
            if not last:
                return
            complete = self.feeds.listed(kind, self.clock.now())
            if complete and not self._seeded:
                self._seeded = True
                self.history.seed(self._tracked_pods(), tier_of=self._tier_of, now=self.clock.now())
        if complete:
            # The listed objects live as long as the service: frozen, full collections stop walking them.
            gc.freeze()
            if self.on_listed is not None:
                self.on_listed()

    def on_change(self, kind: str, event_type: str, raw: msgspec.Raw | bytes) -> None:
        with self._lock:
            happenings = self.ingestor.apply(kind, event_type, raw)
            self.feeds.changed(kind, self.clock.now())
            self._observe(happenings)

    def kueue_waiting_queues(self) -> set[str]:
        """Return the ClusterQueues that have Kueue Workloads waiting for admission (whose positions matter)."""
        with self._lock:
            k = self.state.kueue
            return {
                q
                for key in KUEUE_HELD.waiting(self.state)
                if (w := k.of_key(key)) and (q := k.cluster_queue_of(w))
            }

    def on_kueue_positions(self, positions: dict[tuple[str, str], int], queues: set[str]) -> None:
        """Take the positions Kueue's visibility API gives the pending Workloads of these ClusterQueues."""
        with self._lock:
            self.state.forms.kueue.set_positions(positions, queues)

    def _tracked_pods(self) -> Iterable[Pod]:
        matches = self.policy.selector.matches
        return (p for p in self.state.pods.values() if matches(p))

    def _tier_of(self, p: Pod) -> str:
        return self.policy.tiers.tier_of(p.priority, p.priority_class).name

    def listed_all(self) -> bool:
        return self.feeds.listed_all()

    def _skipped(self, s: Skipped) -> None:
        self.metrics.skipped_object(s.kind)

    def _observe(self, happenings: Iterable[Happening]) -> None:
        tiers = self.policy.tiers
        m = self.metrics
        for h in happenings:
            if isinstance(h, PodScheduled):
                p = h.pod
                tier = tiers.tier_of(p.priority, p.priority_class).name
                if p.gpus > 0:
                    m.scheduled(tier, h.wait)
                if self.policy.selector.matches(p):
                    self.history.record(tier, at=h.at, wait=h.wait, scheduler=p.scheduler)
            elif isinstance(h, PodStarted):
                if h.pod.gpus > 0:
                    m.started(tiers.tier_of(h.pod.priority, h.pod.priority_class).name, h.latency)
                self.preemptions.started(h.pod)
            elif isinstance(h, PreemptionSeen):
                self.preemptions.seen(h.preemption, now=self.clock.now())
            elif isinstance(h, DisruptionSeen):
                d = h.disruption
                pod = self.state.pods.get(d.uid)
                m.disrupted(d.reason, self._tier_of(pod) if pod is not None else "unknown")

    # ---- evaluation -------------------------------------------------------------------------------------

    def evaluate(self, now: float, *, holders_of: Iterable[tuple[str, str]] = ()) -> Tick:
        """Evaluate the queue at `now` and return it as one Tick (also kept as `latest` and in the metrics).

        `holders_of` names (namespace, name) workloads whose statuses the Tick must carry although they do
        not wait (GPU usage's idle holders); workloads preempted often enough to alert are added too.
        """
        started = time.perf_counter()
        health = self.source_health()
        with self._lock:
            st = self.state
            # Before the evaluation, so that the snapshot's preemptions carry the outcomes reached by now.
            judged, skipped = st.ledger.settle(now, self.policy.preemption_outcome_window)
            for p in judged:
                self.preemptions.judged(p)
            for s in skipped:
                self.preemptions.unjudged(s)
            snap = self.evaluator.evaluate(st, now=now)
            listed = self._listed_figures()
            running = self._running.by_tier(st, listed.running)
            # A thrashing workload that runs again keeps its alert's labels (team, GPUs) only if the rules
            # still see its status: add it as if named.
            thrashing = {
                (k.namespace, k.name)
                for k, n in snap.recent_preemptions.counts.items()
                if n >= self._thrash_count
            }
            named = {*holders_of, *thrashing}
            if named:  # most ticks name none: no set of the queue's 20,000 names then
                have = {(k.namespace, k.name) for k in (w.facts.key for w in snap.workloads)}
                named -= have
            wanted = named
            holder_statuses = tuple(x for ns, n in sorted(wanted) for x in self._find(ns, n, now))
            quota = tuple(
                QuotaLine(q.namespace, q.name, st.team_of(q.namespace), q.hard_gpus, q.used_gpus)
                for q in sorted(st.control.quotas.values(), key=lambda q: (q.namespace, q.name))
                if q.hard_gpus is not None
            )
            # Only while urgent work is stuck does the priority-inversion rule read holders, and then only
            # those of lower tiers than the highest stuck one.
            below = holders_needed_below(
                snap,
                self._inversion_tiers,
                self.policy.tiers,
                among=listed.longest_waiting(snap),
            )
            holders = self._holders.below(st, below) if below is not None else ()
            holder_changes = self._holders.changes if below is not None else None
            self._forget_read_changes(st)
            self.preemptions.settle(now=now, latest=st.ledger.preemptions)
            gauges = queue_gauges(snap, listed, st, self.policy.tiers, thrash_count=self._thrash_count)
            stuck = stuck_heads(
                snap,
                st,
                stuck_after=self.stuck_after,
                selector=self.policy.selector,
                last_bound=self.history.last_bound,
                index=listed.stuck,
            )
            waits = self.history.waits(now)
            volcano_queues = queue_lines(st)
            dra_problems = tuple(st.unresolved_claims())
            gauges = dataclasses.replace(gauges, dra_unresolved=dict(Counter(u.reason for u in dra_problems)))
            kueue_queues = kueue_queue_lines(st)
            gauges = with_fairness(gauges, snap, st, self.settings.fairness, volcano_queues, kueue_queues)
            sections = form_sections(st, now)
        duration = time.perf_counter() - started
        self.metrics.evaluated(gauges, duration)
        for key, kind, what, reason in self.evaluator.odd_news():
            # Left out, not fatal: what could not be read is left unsaid (whether it can never start), or a
            # workload with nothing behind it is left out of the queue; `what` says which. Not a malformed
            # object: counted apart, so WatchtowerObjectsUnreadable does not call it one.
            self.metrics.left_out(kind, reason)
            log.warning("%s: skipped, %s", key, what)
        tick = Tick(
            at=now,
            snapshot=snap,
            health=health,
            holders=holders,
            holder_changes=holder_changes,
            holder_statuses=holder_statuses,
            quota=quota,
            running_by_tier=running,
            waits=waits,
            stuck=stuck,
            volcano_queues=volcano_queues,
            dra_problems=dra_problems,
            kueue_queues=kueue_queues,
            form_sections=sections,
            listed_facts=self.evaluator.order.facts,  # replaced, never changed in place, when facts change
            facts_change=self.evaluator.order.last_change(),
        )
        self.latest = tick
        return tick

    def _forget_read_changes(self, st: ClusterState) -> None:
        """Drop the change log's entries every reader has read. The evaluator and the running counts read
        at every tick; the holder index only while urgent work is stuck, so it keeps the log only while it
        is at most HOLDER_LAG entries behind, and otherwise starts over (one walk) when next read."""
        keep = min(
            self.evaluator.needs(st), self._running.needs(st), *(c.needs(st.log) for c in self.log_readers)
        )
        held = self._holders.needs(st)
        if keep - held <= HOLDER_LAG:
            keep = min(keep, held)
        st.log.forget_before(keep)

    def _running_by_tier(self, snap: QueueSnapshot) -> dict[str, int]:
        """Return running workloads per tier, those the snapshot lists (waiting, partly placed) left out.

        A listed workload counts as running exactly when its facts have a bound training pod (the same
        test, on the same state): only those are looked up."""
        return self._running.by_tier(
            self.state, (f.key for w in snap.workloads if (f := w.facts).pods_running)
        )

    def status_of(self, key: WorkloadKey, now: float | None = None) -> WorkloadStatus | None:
        """Return one workload's status now (running ones included), computed on demand."""
        with self._lock:
            return self.evaluator.status_of(self.state, key, now=self.clock.now() if now is None else now)

    def gpus_by_node(self, key: WorkloadKey) -> dict[str, int]:
        """Return node → GPUs the workload's bound pods hold now (the Tick lists holders only when a rule
        needs them all)."""
        with self._lock:
            return gpus_held_by_node(self.state, key)

    def find(self, namespace: str, name: str, now: float | None = None) -> list[WorkloadStatus]:
        """Return the statuses of every tracked workload called namespace/name (of any kind), on demand."""
        with self._lock:
            return self._find(namespace, name, self.clock.now() if now is None else now)

    def _find(self, namespace: str, name: str, at: float) -> list[WorkloadStatus]:
        st = self.state
        keys = [k for k in st.by_workload if k.name == name and k.namespace == namespace]
        keys += [
            k
            for k in st.control.quota_refusals
            if k.name == name and k.namespace == namespace and k not in keys
        ]
        found = (self.evaluator.status_of(st, k, now=at) for k in sorted(keys))
        return [s for s in found if s is not None]

    def _listed_figures(self) -> ListedFigures:
        """Return what the evaluator's listed facts give: the last tick's figures moved by what its order
        took out and put in since, or new ones when it started over (or the inversion tiers changed)."""
        order = self.evaluator.order
        last = self._listed
        if last is not None and last.inversion_tiers == self._inversion_tiers:
            change = order.change_since(last.generation)
            if change is not None:
                last.apply(*change, order.generation)
                return last
        new = self._listed = ListedFigures(
            order.facts,
            generation=order.generation,
            tier_names=[t.name for t in self.policy.tiers.tiers],
            inversion_tiers=self._inversion_tiers,
            reason=self._reasons.pending,
        )
        return new

    def prune(self, now: float) -> None:
        with self._lock:
            self.state.prune(now=now, keep_seconds=self._keep)
            self.preemptions.forget_before(now - self._keep)

    # ---- readiness --------------------------------------------------------------------------------------

    def readiness(self) -> Readiness:
        """Return whether the picture is complete and fresh, with per-kind detail saying how stale."""
        latest = self.latest
        return self.feeds.readiness(
            self.source_health(),
            now=self.clock.now(),
            stale_after=self.stale_after,
            evaluated_at=latest.snapshot.at if latest is not None else None,
            skipped=self.ingestor.skipped,
        )
