"""Watchtower's own Prometheus metrics (`watchtower_*`), served at /metrics.

Every metric object is created by `WatchtowerMetrics` on the registry it is given: a test builds its own
registry and nothing leaks between instances. Gauges that describe the queue are replaced as a whole after
each evaluation (a scrape never sees half of one evaluation and half of the next); counters and histograms
are fed from the state's happenings as they arrive.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import generate_latest

from watchtower.domain.fairness.live import TeamNow
from watchtower.domain.forms.dra.records import UNRESOLVED_REASONS
from watchtower.domain.health import SourceHealth
from watchtower.domain.promql import (
    CONFIG_RELOADS,
    CONFIG_VALID,
    DISRUPTIONS,
    DRA_UNRESOLVED_PODS,
    EVALUATION_DURATION,
    FRAGMENTED_WORKLOADS,
    GATED_PODS,
    GPUS,
    LAST_EVALUATION,
    MALFORMED_OBJECTS_SKIPPED,
    MOST_PREEMPTIONS,
    OLDEST_WAIT,
    PARTIAL_GANG_GPUS_HELD,
    PARTIAL_GANGS,
    PENDING_WORKLOADS,
    PICTURE_STALENESS,
    PREEMPTION_GPU_HOURS_LOST,
    PREEMPTION_TO_RUNNING,
    PREEMPTIONS,
    QUOTA_GPUS_HARD,
    QUOTA_GPUS_USED,
    SNAPSHOT_CONSUMER_FAILURES,
    STARTUP_LATENCY,
    TEAM_GPUS_DEMAND,
    TEAM_GPUS_ENTITLED,
    TEAM_GPUS_FAIR_SHARE,
    TEAM_GPUS_USED,
    TEAM_OLDEST_WAIT,
    TEAM_PREEMPTION_GPU_HOURS_LOST,
    TEAM_PREEMPTIONS,
    TEAM_SATISFACTION,
    THRASHING_WORKLOADS,
    TIME_TO_SCHEDULE,
    WAITING_GPUS,
    WATCH_RESTARTS,
)
from watchtower.ports import QueueGauges

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Waits in a GPU queue run from seconds to days; the tier thresholds are added as bucket bounds so that
# "how many waited past their threshold" is exact.
WAIT_BUCKETS = (
    1.0,
    5.0,
    15.0,
    30.0,
    60.0,
    120.0,
    300.0,
    600.0,
    900.0,
    1800.0,
    3600.0,
    7200.0,
    14400.0,
    28800.0,
    43200.0,
    86400.0,
    172800.0,
)
# From the victim's DisruptionTarget to its preemptor running: the victims' grace period, then binding and
# start-up. Users expect about 30 s; checkpointing training victims take minutes.
PREEMPTION_TO_RUNNING_BUCKETS = (5.0, 10.0, 15.0, 30.0, 45.0, 60.0, 90.0, 120.0, 300.0, 600.0, 1800.0, 3600.0)
STARTUP_BUCKETS = (1.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1200.0, 1800.0, 3600.0)
EVALUATION_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)
UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class FeedHealth:
    """What the cluster source says about its feed: restarts per kind and how stale the picture is."""

    restarts: Mapping[str, int] = field(default_factory=dict)
    staleness: Mapping[str, float] = field(default_factory=dict)  # per kind, seconds
    stale_seconds: float | None = None  # overall


def feed_health_of(h: SourceHealth) -> FeedHealth:
    """Return the source's health as the figures `/metrics` shows: restarts and staleness per kind."""
    stale = {k: f.stale_seconds for k, f in h.kinds.items() if f.stale_seconds is not None}
    return FeedHealth(
        restarts={k: f.restarts for k, f in h.kinds.items()}, staleness=stale, stale_seconds=h.staleness()
    )


def _family(
    cls: type[GaugeMetricFamily] | type[CounterMetricFamily],
    name: str,
    doc: str,
    label: str,
    values: Iterable[tuple[str, float]],
) -> GaugeMetricFamily | CounterMetricFamily:
    """Return a metric family of one label with a sample per (label value, value)."""
    family = cls(name, doc, labels=[label])
    for key, n in values:
        family.add_metric([key], n)
    return family


def _fairness_families(g: QueueGauges) -> Iterable[Metric]:
    """The fairness gauges of one evaluation: per (team, tier) waits, per team the shares."""
    for name, doc, values in (
        (WAITING_GPUS, "GPUs waiting workloads still need, by team and tier.", g.waiting_gpus),
        (
            TEAM_OLDEST_WAIT,
            "Longest current wait of a waiting workload, by team and tier.",
            g.team_oldest_wait,
        ),
    ):
        family = GaugeMetricFamily(name, doc, labels=["team", "tier"])
        for (team, tier), v in sorted(values.items()):
            family.add_metric([team, tier], v)
        yield family
    teams = sorted(g.teams.items())
    per_team: list[tuple[str, str, Callable[[TeamNow], float | None]]] = [
        (
            TEAM_GPUS_USED,
            "GPUs requested by the team's running pods (DRA claims included).",
            lambda t: t.used,
        ),
        (TEAM_GPUS_DEMAND, "GPUs the team uses plus those its waiting work still needs.", lambda t: t.demand),
        (
            TEAM_GPUS_FAIR_SHARE,
            "The team's max-min fair share of the cluster's GPUs over every team's demand.",
            lambda t: t.fair_share,
        ),
        (
            TEAM_SATISFACTION,
            "min(1, used / min(demand, fair share)); only teams with demand (Jain's index is over them).",
            lambda t: t.satisfaction,
        ),
    ]
    for name, doc, value in per_team:
        family = GaugeMetricFamily(name, doc, labels=["team"])
        for team, t in teams:
            x = value(t)
            if x is not None:
                family.add_metric([team], x)
        yield family
    entitled = GaugeMetricFamily(
        TEAM_GPUS_ENTITLED,
        "GPUs the team is entitled to, by where the entitlement comes from (fairness.entitlement).",
        labels=["team", "source"],
    )
    for team, t in teams:
        if t.entitled is not None:
            entitled.add_metric([team, t.entitled_by], t.entitled)
    yield entitled


class _QueueCollector:
    def __init__(self, health: Callable[[], FeedHealth]) -> None:
        self.gauges = QueueGauges()
        self._health = health

    def describe(self) -> Iterable[Metric]:
        return []

    def collect(self) -> Iterable[Metric]:
        g = self.gauges  # one reference read: a whole evaluation
        pending = GaugeMetricFamily(
            PENDING_WORKLOADS,
            "Workloads waiting (pending, partial gang or quota-blocked) by tier, namespace and main reason.",
            labels=["tier", "namespace", "reason"],
        )
        for (tier, ns, reason), n in sorted(g.pending.items()):
            pending.add_metric([tier, ns, reason], n)
        yield pending
        yield _family(
            GaugeMetricFamily,
            OLDEST_WAIT,
            "Longest current wait of a waiting workload, by tier (0 when none waits).",
            "tier",
            g.oldest_wait.items(),
        )
        partial = GaugeMetricFamily(
            PARTIAL_GANGS,
            "Gangs with some pods bound (holding GPUs) and some still waiting, by tier.",
            labels=["tier"],
        )
        held = GaugeMetricFamily(
            PARTIAL_GANG_GPUS_HELD,
            "GPUs held by the bound pods of partial gangs, by tier.",
            labels=["tier"],
        )
        for tier, n in g.partial_gangs.items():
            partial.add_metric([tier], n)
            held.add_metric([tier], g.partial_gang_gpus.get(tier, 0))
        yield partial
        yield held
        used = GaugeMetricFamily(
            QUOTA_GPUS_USED,
            "requests.nvidia.com/gpu used per ResourceQuota.",
            labels=["namespace", "resourcequota"],
        )
        hard = GaugeMetricFamily(
            QUOTA_GPUS_HARD,
            "requests.nvidia.com/gpu hard limit per ResourceQuota.",
            labels=["namespace", "resourcequota"],
        )
        for (ns, name), n in sorted(g.quota_used.items()):
            used.add_metric([ns, name], n)
        for (ns, name), n in sorted(g.quota_hard.items()):
            hard.add_metric([ns, name], n)
        yield used
        yield hard
        yield GaugeMetricFamily(
            GATED_PODS, "Pods held by scheduling gates (not queued yet).", value=g.gated_pods
        )
        yield GaugeMetricFamily(
            FRAGMENTED_WORKLOADS,
            "Waiting workloads whose pod would fit in the free GPUs of the cluster but not on any one node.",
            value=g.fragmented_workloads,
        )
        gpus = GaugeMetricFamily(GPUS, "GPUs of schedulable GPU nodes.", labels=["state"])
        gpus.add_metric(["allocatable"], g.gpus_allocatable)
        gpus.add_metric(["used"], g.gpus_used)
        yield gpus
        yield _family(
            GaugeMetricFamily,
            THRASHING_WORKLOADS,
            "Workloads preempted at least alerting.rules.thrash_count times within queue.thrash_window, by tier.",
            "tier",
            sorted(g.thrashing.items()),
        )
        yield _family(
            GaugeMetricFamily,
            MOST_PREEMPTIONS,
            "The most preemptions one workload of the tier had within the thrash window (0: none).",
            "tier",
            sorted(g.most_preemptions.items()),
        )
        yield _family(
            GaugeMetricFamily,
            DRA_UNRESOLVED_PODS,
            "Pods naming a DRA ResourceClaim, template or DeviceClass that is not there, by what is missing.",
            "reason",
            # every reason always: a fixed, small label set
            ((reason, g.dra_unresolved.get(reason, 0)) for reason in UNRESOLVED_REASONS),
        )
        yield from _fairness_families(g)
        if g.evaluated_at is not None:
            yield GaugeMetricFamily(
                LAST_EVALUATION,
                "When the queue was last evaluated (cluster clock, Unix seconds).",
                value=g.evaluated_at,
            )

        h = self._health()
        yield _family(
            CounterMetricFamily,
            WATCH_RESTARTS,
            "Watch restarts per kind, as counted by the cluster source.",
            "kind",
            sorted(h.restarts.items()),
        )
        overall = [("all", h.stale_seconds)] if h.stale_seconds is not None else []
        yield _family(
            GaugeMetricFamily,
            PICTURE_STALENESS,
            "Seconds since the cluster source last heard from the API server, per kind.",
            "kind",
            [*sorted(h.staleness.items()), *overall],
        )


class WatchtowerMetrics:
    """The `watchtower_*` metrics on one registry."""

    content_type = CONTENT_TYPE

    def __init__(
        self,
        *,
        registry: CollectorRegistry,
        tier_bounds: Iterable[float] = (),
        feed_health: Callable[[], FeedHealth] = FeedHealth,
    ) -> None:
        self.registry = registry
        self._config_valid = Gauge(
            CONFIG_VALID,
            "1 while the configuration file is the one running; 0 after it changed to one that cannot be used.",
            registry=registry,
        )
        self._config_valid.set(1)
        self._config_reloads = Counter(
            CONFIG_RELOADS,
            "Changes of the configuration file looked at, by result (applied, invalid).",
            ["result"],
            registry=registry,
        )
        for result in ("applied", "invalid"):
            self._config_reloads.labels(result)
        buckets = tuple(sorted(set(WAIT_BUCKETS) | {float(b) for b in tier_bounds if b > 0}))
        self.time_to_schedule = Histogram(
            TIME_TO_SCHEDULE,
            "Creation to binding (PodScheduled=True) of GPU pods, by tier.",
            ["tier"],
            buckets=buckets,
            registry=registry,
        )
        self.startup = Histogram(
            STARTUP_LATENCY,
            "Binding to first container start (image pulls, volume mounts), by tier.",
            ["tier"],
            buckets=STARTUP_BUCKETS,
            registry=registry,
        )
        self.preemptions = Counter(
            PREEMPTIONS,
            "Pods preempted by the scheduler, by victim and preemptor tier.",
            ["victim_tier", "preemptor_tier"],
            registry=registry,
        )
        self.gpu_hours_lost = Counter(
            PREEMPTION_GPU_HOURS_LOST,
            "GPU-hours of work lost to preemption (GPUs × time the victim had run), by victim and preemptor tier.",
            ["victim_tier", "preemptor_tier"],
            registry=registry,
        )
        self.team_preemptions = Counter(
            TEAM_PREEMPTIONS,
            "Pods preempted by the scheduler, by the victim's and the preemptor's team.",
            ["victim_team", "preemptor_team"],
            registry=registry,
        )
        self.team_gpu_hours_lost = Counter(
            TEAM_PREEMPTION_GPU_HOURS_LOST,
            "GPU-hours of work lost to preemption, by the victim's and the preemptor's team.",
            ["victim_team", "preemptor_team"],
            registry=registry,
        )
        self.preemption_to_running = Histogram(
            PREEMPTION_TO_RUNNING,
            "From a victim's DisruptionTarget to its preemptor's first container start, by preemptor tier.",
            ["tier"],
            buckets=PREEMPTION_TO_RUNNING_BUCKETS,
            registry=registry,
        )
        self.disruptions = Counter(
            DISRUPTIONS,
            "Pods taken away for a reason other than preemption (eviction API, taint manager, pod GC, "
            "kubelet), by reason and tier.",
            ["reason", "tier"],
            registry=registry,
        )
        self.skipped = Counter(
            MALFORMED_OBJECTS_SKIPPED,
            "API objects skipped because they could not be read, per kind.",
            ["kind"],
            registry=registry,
        )
        self.evaluation = Histogram(
            EVALUATION_DURATION,
            "Wall time of one queue evaluation.",
            buckets=EVALUATION_BUCKETS,
            registry=registry,
        )
        self.consumer_failures = Counter(
            SNAPSHOT_CONSUMER_FAILURES,
            "Snapshot consumers (alerting, ...) that raised while handling an evaluation.",
            ["consumer"],
            registry=registry,
        )
        self._queue = _QueueCollector(feed_health)
        registry.register(self._queue)

    def set_queue(self, gauges: QueueGauges) -> None:
        self._queue.gauges = gauges

    # ---- the QueueMetrics port -------------------------------------------------------------------------

    def scheduled(self, tier: str, wait: float) -> None:
        self.time_to_schedule.labels(tier).observe(wait)

    def started(self, tier: str, latency: float) -> None:
        self.startup.labels(tier).observe(latency)

    def preempted(self, victim_tier: str, preemptor_tier: str, gpu_hours_lost: float | None) -> None:
        self.preemptions.labels(victim_tier, preemptor_tier).inc()
        if gpu_hours_lost:
            self.gpu_hours_lost.labels(victim_tier, preemptor_tier).inc(gpu_hours_lost)

    def preempted_between_teams(
        self, victim_team: str, preemptor_team: str, gpu_hours_lost: float | None
    ) -> None:
        self.team_preemptions.labels(victim_team, preemptor_team).inc()
        if gpu_hours_lost:
            self.team_gpu_hours_lost.labels(victim_team, preemptor_team).inc(gpu_hours_lost)

    def preemptor_running(self, tier: str, latency: float) -> None:
        self.preemption_to_running.labels(tier).observe(latency)

    def disrupted(self, reason: str, tier: str) -> None:
        self.disruptions.labels(reason, tier).inc()

    def skipped_object(self, kind: str) -> None:
        self.skipped.labels(kind).inc()

    def evaluated(self, gauges: QueueGauges, duration: float) -> None:
        self.set_queue(gauges)
        self.evaluation.observe(duration)

    def consumer_failed(self, consumer: str) -> None:
        self.consumer_failures.labels(consumer).inc()

    def config_reloaded(self, result: str, *, valid: bool) -> None:
        """Count one look at a changed configuration file (`applied` or `invalid`) and say if it was valid."""
        self._config_reloads.labels(result).inc()
        self._config_valid.set(1 if valid else 0)

    def render(self) -> bytes:
        """Return the registry in the Prometheus text format 0.0.4."""
        return generate_latest(self.registry)

    def render_queue(self, names: Collection[str]) -> bytes:
        """Return the families named of the latest evaluation's gauges as `render` shows them, and nothing
        else (the demo's past week samples these every 5 simulated minutes; collecting the whole registry,
        histograms included, was a sixth of that sampling)."""
        return generate_latest(_Only(self._queue, names))


class _Only:
    """A collector's families of the names given, for generate_latest (anything with `collect`)."""

    def __init__(self, collector: _QueueCollector, names: Collection[str]) -> None:
        self.collector, self.names = collector, names

    def collect(self) -> Iterable[Metric]:
        return (m for m in self.collector.collect() if m.name in self.names)
