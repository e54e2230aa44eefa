"""`WatchtowerMetrics`: the `watchtower_*` metrics on one registry. The counters and histograms are fed from
the state's happenings as they arrive (the `QueueMetrics` port); the queue's gauges are collected by
`queue.QueueCollector`, registered beside them; `render` gives the Prometheus text format."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.exposition import generate_latest

from watchtower.domain.promql.names import (
    CONFIG_RELOADS,
    CONFIG_VALID,
    DISRUPTIONS,
    EVALUATION_DURATION,
    EVENT_LOOP_LAG,
    EVENT_LOOP_LAGS,
    MALFORMED_OBJECTS_SKIPPED,
    OBJECTS_LEFT_OUT,
    PREEMPTION_GPU_HOURS_LOST,
    PREEMPTION_OUTCOME_SKIPS,
    PREEMPTION_OUTCOMES,
    PREEMPTION_TO_RUNNING,
    PREEMPTIONS,
    PREEMPTIONS_UNHELPFUL,
    PREEMPTIONS_UNHELPFUL_GPU_HOURS,
    SNAPSHOT_CONSUMER_FAILURES,
    START_ESTIMATE_ERROR,
    STARTUP_LATENCY,
    TEAM_PREEMPTION_GPU_HOURS_LOST,
    TEAM_PREEMPTIONS,
    TIME_TO_SCHEDULE,
)
from watchtower.ports import QueueGauges

from .queue import FeedHealth, Only, QueueCollector

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
# A free loop wakes within a millisecond or two; the budget for one step on the loop is 100 ms; a
# stall of seconds is what operators page on.
# A start estimate's relative error (estimated - actual start, over the actual wait from the estimate,
# domain/estimate_accuracy.py): at least -1 (it cannot say "before now"), unbounded above. ±0.5 are
# bounds, so "within ±50 %" is a difference of two buckets.
ESTIMATE_ERROR_BUCKETS = (-0.9, -0.75, -0.5, -0.25, -0.1, 0.0, 0.1, 0.25, 0.5, 1.0, 2.0, 4.0, 10.0)
LOOP_LAG_BUCKETS = (0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


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
        self.preemption_outcomes = Counter(
            PREEMPTION_OUTCOMES,
            "Preempted pods whose preemption was judged, by preemptor and victim tier and outcome "
            "(helped: the preemptor started on the victims' node; did_not_help).",
            ["preemptor_tier", "victim_tier", "outcome"],
            registry=registry,
        )
        self.preemptions_unhelpful = Counter(
            PREEMPTIONS_UNHELPFUL,
            "Preempted pods whose preemption did not help, by preemptor and victim tier and reason "
            "(started_elsewhere, still_waiting, room_taken, deleted).",
            ["preemptor_tier", "victim_tier", "reason"],
            registry=registry,
        )
        self.unhelpful_gpu_hours = Counter(
            PREEMPTIONS_UNHELPFUL_GPU_HOURS,
            "GPU-hours of work thrown away by preemptions that did not help, by preemptor and victim tier.",
            ["preemptor_tier", "victim_tier"],
            registry=registry,
        )
        self.outcome_skips = Counter(
            PREEMPTION_OUTCOME_SKIPS,
            "Preemption records that could not be judged (no preemptor uid, or a preemptor pod never seen).",
            ["reason"],
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
        self.left_out_objects = Counter(
            OBJECTS_LEFT_OUT,
            "Objects read well and left out on purpose, per kind and reason: not_real_work (a Kueue group "
            "Workload whose pods do not exist, not listed), never_undecided (whether it can never start "
            "could not be read from a quota's or Kueue's words; the work is listed all the same).",
            ["kind", "reason"],
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
        self._loop_lag = Gauge(
            EVENT_LOOP_LAG,
            "How late the event loop woke the lag monitor's latest timer: a step that holds the loop "
            "(a slow rule, a blocking call) delays everything else by as much.",
            registry=registry,
        )
        self._loop_lags = Histogram(
            EVENT_LOOP_LAGS,
            "How late the event loop woke each of the lag monitor's timers: stalls between two scrapes.",
            buckets=LOOP_LAG_BUCKETS,
            registry=registry,
        )
        self.estimate_error = Histogram(
            START_ESTIMATE_ERROR,
            "Start estimates checked against the start that followed: (estimated - actual start) / the actual"
            " wait from the estimate, once per started wait whose first estimate gave a number, by tier.",
            ["tier"],
            buckets=ESTIMATE_ERROR_BUCKETS,
            registry=registry,
        )
        self._queue = QueueCollector(feed_health)
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

    def preemption_judged(
        self, preemptor_tier: str, victim_tier: str, outcome: str, reason: str, gpu_hours_lost: float | None
    ) -> None:
        self.preemption_outcomes.labels(preemptor_tier, victim_tier, outcome).inc()
        if outcome == "helped":
            return
        self.preemptions_unhelpful.labels(preemptor_tier, victim_tier, reason).inc()
        # Created at the first unhelpful preemption even when it lost nothing, so a rate reads 0, not absent.
        self.unhelpful_gpu_hours.labels(preemptor_tier, victim_tier).inc(gpu_hours_lost or 0.0)

    def preemption_unjudged(self, reason: str) -> None:
        self.outcome_skips.labels(reason).inc()

    def disrupted(self, reason: str, tier: str) -> None:
        self.disruptions.labels(reason, tier).inc()

    def skipped_object(self, kind: str) -> None:
        self.skipped.labels(kind).inc()

    def left_out(self, kind: str, reason: str) -> None:
        self.left_out_objects.labels(kind, reason).inc()

    def evaluated(self, gauges: QueueGauges, duration: float) -> None:
        self.set_queue(gauges)
        self.evaluation.observe(duration)

    def consumer_failed(self, consumer: str) -> None:
        self.consumer_failures.labels(consumer).inc()

    def estimate_checked(self, tier: str, relative_error: float) -> None:
        """Record one start estimate checked against its start (the EstimateMetrics port)."""
        self.estimate_error.labels(tier).observe(relative_error)

    def config_reloaded(self, result: str, *, valid: bool) -> None:
        """Count one look at a changed configuration file (`applied` or `invalid`) and say if it was valid."""
        self._config_reloads.labels(result).inc()
        self._config_valid.set(1 if valid else 0)

    def loop_lagged(self, seconds: float) -> None:
        """Record one measurement of how late the event loop ran a timer."""
        self._loop_lag.set(seconds)
        self._loop_lags.observe(seconds)

    def render(self) -> bytes:
        """Return the registry in the Prometheus text format 0.0.4."""
        return generate_latest(self.registry)

    def render_queue(self, names: Collection[str]) -> bytes:
        """Return the families named of the latest evaluation's gauges as `render` shows them, and nothing
        else (the demo's past week samples these every 5 simulated minutes; collecting the whole registry,
        histograms included, was a sixth of that sampling)."""
        return generate_latest(Only(self._queue, names))
