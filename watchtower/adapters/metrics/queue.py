"""The queue's gauges, replaced as a whole after each evaluation (a scrape never sees half of one
evaluation and half of the next), with the cluster source's feed health (watch restarts, staleness)
collected beside them."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from watchtower.domain.forms.dra.records import UNRESOLVED_REASONS
from watchtower.domain.health import SourceHealth
from watchtower.domain.promql.names import (
    DRA_UNRESOLVED_PODS,
    FRAGMENTED_WORKLOADS,
    GATED_PODS,
    GATED_WORKLOADS,
    GPUS,
    LAST_EVALUATION,
    MOST_PREEMPTIONS,
    NEVER_WORKLOADS,
    OLDEST_WAIT,
    PARTIAL_GANG_GPUS_HELD,
    PARTIAL_GANGS,
    PENDING_WORKLOADS,
    PICTURE_STALENESS,
    QUOTA_GPUS_HARD,
    QUOTA_GPUS_USED,
    THRASHING_WORKLOADS,
    WATCH_RESTARTS,
)
from watchtower.ports import QueueGauges

from .fairness import fairness_families


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


def one_label_family(
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


class QueueCollector:
    """The latest evaluation's queue gauges and the feed health, as metric families at each scrape."""

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
        yield one_label_family(
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
        yield GaugeMetricFamily(GATED_PODS, "Pods held by scheduling gates.", value=g.gated_pods)
        gated = GaugeMetricFamily(
            GATED_WORKLOADS,
            "Waiting workloads held by scheduling gates, by tier and the gate's owner (kueue, volcano, other).",
            labels=["tier", "owner"],
        )
        for (tier, owner), n in sorted(g.gated_workloads.items()):
            gated.add_metric([tier, owner], n)
        yield gated
        never = GaugeMetricFamily(
            NEVER_WORKLOADS,
            "Waiting workloads that can never start as the cluster is configured, by tier and why "
            "(node_resources, node_selector, gang, quota_hard, kueue_max_quota, kueue_no_matching_flavor).",
            labels=["tier", "reason"],
        )
        for (tier, reason), n in sorted(g.never_workloads.items()):
            never.add_metric([tier, reason], n)
        yield never
        yield GaugeMetricFamily(
            FRAGMENTED_WORKLOADS,
            "Waiting workloads whose pod would fit in the free GPUs of the cluster but not on any one node.",
            value=g.fragmented_workloads,
        )
        gpus = GaugeMetricFamily(GPUS, "GPUs of schedulable GPU nodes.", labels=["state"])
        gpus.add_metric(["allocatable"], g.gpus_allocatable)
        gpus.add_metric(["used"], g.gpus_used)
        yield gpus
        yield one_label_family(
            GaugeMetricFamily,
            THRASHING_WORKLOADS,
            "Workloads preempted at least alerting.rules.thrash_count times within queue.thrash_window, by tier.",
            "tier",
            sorted(g.thrashing.items()),
        )
        yield one_label_family(
            GaugeMetricFamily,
            MOST_PREEMPTIONS,
            "The most preemptions one workload of the tier had within the thrash window (0: none).",
            "tier",
            sorted(g.most_preemptions.items()),
        )
        yield one_label_family(
            GaugeMetricFamily,
            DRA_UNRESOLVED_PODS,
            "Pods naming a DRA ResourceClaim, template or DeviceClass that is not there, by what is missing.",
            "reason",
            # every reason always: a fixed, small label set
            ((reason, g.dra_unresolved.get(reason, 0)) for reason in UNRESOLVED_REASONS),
        )
        yield from fairness_families(g)
        if g.evaluated_at is not None:
            yield GaugeMetricFamily(
                LAST_EVALUATION,
                "When the queue was last evaluated (cluster clock, Unix seconds).",
                value=g.evaluated_at,
            )

        h = self._health()
        yield one_label_family(
            CounterMetricFamily,
            WATCH_RESTARTS,
            "Watch restarts per kind, as counted by the cluster source.",
            "kind",
            sorted(h.restarts.items()),
        )
        overall = [("all", h.stale_seconds)] if h.stale_seconds is not None else []
        yield one_label_family(
            GaugeMetricFamily,
            PICTURE_STALENESS,
            "Seconds since the cluster source last heard from the API server, per kind.",
            "kind",
            [*sorted(h.staleness.items()), *overall],
        )


class Only:
    """A collector's families of the names given, for generate_latest (anything with `collect`)."""

    def __init__(self, collector: QueueCollector, names: Collection[str]) -> None:
        self.collector, self.names = collector, names

    def collect(self) -> Iterable[Metric]:
        return (m for m in self.collector.collect() if m.name in self.names)
