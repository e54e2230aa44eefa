"""Recording rules: the queue per tier from Watchtower's own metrics, GPUs per team from DCGM and KSM, and
fairness over time (Jain's index, attainment, idle-allocated share) for the Fairness dashboard.

Names follow `level:metric:operations`. The GPU expressions are the ones the service runs
(domain/promql/exporters.py), so a figure on a dashboard is the figure Watchtower alerts on. The dashboards read
these series: they need the rules loaded, as kubernetes-mixin dashboards do.
"""

from __future__ import annotations

from watchtower.domain.promql.fairness import FairnessQueries
from watchtower.domain.promql.names import (
    CLUSTER_IDLE_SHARE,
    FAIRNESS_EVALUATION,
    JAIN_INDEX,
    MIG_PROFILE,
    OLDEST_WAIT,
    PENDING_WORKLOADS,
    PREEMPTION_GPU_HOURS_LOST,
    PREEMPTIONS,
    TEAM_ATTAINMENT,
    TEAM_IDLE_SHARE,
    TIME_TO_SCHEDULE_P50,
    TIME_TO_SCHEDULE_P95,
)
from watchtower.domain.promql.syntax import duration

from .params import RuleParams

PENDING_BY_TIER = f"tier:{PENDING_WORKLOADS}:sum"
PENDING_BY_NAMESPACE_TIER = f"namespace_tier:{PENDING_WORKLOADS}:sum"
OLDEST_WAIT_BY_TIER = f"tier:{OLDEST_WAIT}:max"
SCHEDULE_P50 = TIME_TO_SCHEDULE_P50
SCHEDULE_P95 = TIME_TO_SCHEDULE_P95
PREEMPTIONS_RATE = f"victim_tier_preemptor_tier:{PREEMPTIONS}:rate"
GPU_HOURS_LOST_RATE = f"victim_tier:{PREEMPTION_GPU_HOURS_LOST}:rate"
NAMESPACE_TEAM = "namespace_team:kube_namespace_labels:max"
TEAM_ALLOCATED = "team:watchtower_gpus_allocated:sum"
NAMESPACE_ALLOCATED = "namespace:watchtower_gpus_allocated:sum"
CLUSTER_ALLOCATED = "cluster:watchtower_gpus_allocated:sum"
TEAM_UTILISATION = "team:watchtower_gpu_utilisation:avg"
NAMESPACE_UTILISATION = "namespace:watchtower_gpu_utilisation:avg"
CLUSTER_UTILISATION = "cluster:watchtower_gpu_utilisation:avg"
POD_IDLE_DEVICES = "namespace_pod:watchtower_idle_devices:count"
TEAM_IDLE_GPUS = "team:watchtower_idle_gpus:count"
TEAM_IDLE_SLICES = "team:watchtower_idle_mig_slices:count"
MIG_SLICES = "profile:watchtower_mig_slices:count"
MIG_SLICES_USED = "profile:watchtower_mig_slices_in_use:count"


def _rule(name: str, expr: str) -> dict[str, object]:
    return {"record": name, "expr": expr}


def queue_group(p: RuleParams) -> dict[str, object]:
    """Return the rule group summing Watchtower's queue metrics per tier."""
    own = p.own
    rate = p.w(p.rate_window)
    return {
        "name": "watchtower.queue.rules",
        "rules": [
            _rule(PENDING_BY_TIER, own.pending("tier")),
            _rule(PENDING_BY_NAMESPACE_TIER, own.pending("namespace", "tier")),
            _rule(OLDEST_WAIT_BY_TIER, own.oldest_wait("tier")),
            _rule(SCHEDULE_P50, own.time_to_schedule_quantile(0.5, rate)),
            _rule(SCHEDULE_P95, own.time_to_schedule_quantile(0.95, rate)),
            _rule(PREEMPTIONS_RATE, own.preemption_rate(rate, "victim_tier", "preemptor_tier")),
            _rule(GPU_HOURS_LOST_RATE, own.gpu_hours_lost_rate(rate, "victim_tier")),
        ],
    }


def gpu_group(p: RuleParams) -> dict[str, object]:
    """Return the rule group of GPU allocation and utilisation per team, namespace and cluster."""
    q = p.queries
    avg = p.rate_window
    p.w(p.idle_window)  # refuse an idle window of fewer than 4 scrapes before writing anything
    mig = q.device_utilisation(kind="slice")
    running = q.pod_running()
    return {
        "name": "watchtower.gpu.rules",
        "rules": [
            _rule(NAMESPACE_TEAM, q.namespace_team()),
            _rule(TEAM_ALLOCATED, q.team_gpus_allocated()),
            _rule(NAMESPACE_ALLOCATED, q.namespace_gpus_allocated()),
            _rule(CLUSTER_ALLOCATED, q.cluster_gpus_allocated()),
            _rule(TEAM_UTILISATION, q.team_utilisation_avg(avg)),
            _rule(NAMESPACE_UTILISATION, q.namespace_utilisation_avg(avg)),
            _rule(CLUSTER_UTILISATION, q.cluster_utilisation_avg(avg)),
            _rule(POD_IDLE_DEVICES, q.pod_idle_devices(p.idle_window, p.idle_threshold)),
            _rule(TEAM_IDLE_GPUS, q.team_idle_devices(avg, p.idle_threshold, kind="gpu")),
            _rule(TEAM_IDLE_SLICES, q.team_idle_devices(avg, p.idle_threshold, kind="slice")),
            _rule(MIG_SLICES, f"count by ({MIG_PROFILE}) ({mig})"),
            _rule(MIG_SLICES_USED, f"count by ({MIG_PROFILE}) (({mig}) and on (namespace, pod) {running})"),
        ],
    }


def fairness_group(p: RuleParams) -> dict[str, object]:
    """Return the rule group of fairness over time: Jain's index over the teams with demand and each team's
    attainment from Watchtower's gauges; the idle share of allocated GPUs per team and cluster-wide from
    DCGM and KSM (a team with GPUs and none idle is 0, not missing)."""
    own, q = p.own, p.queries
    idle = q.team_idle_devices(p.rate_window, p.idle_threshold, kind="gpu")
    allocated = q.team_gpus_allocated()
    # `or vector(0)`: no idle GPU is a share of 0. A vector has no cluster label, so in fleet mode each
    # cluster's 0 comes from its own allocation instead.
    no_idle = f"sum ({allocated}) * 0" if p.keep else "vector(0)"
    return {
        "name": "watchtower.fairness.rules",
        "rules": [
            _rule(JAIN_INDEX, own.jain_index()),
            _rule(TEAM_ATTAINMENT, own.attainment()),
            _rule(TEAM_IDLE_SHARE, f"(({idle}) or ({allocated}) * 0) / (({allocated}) > 0)"),
            _rule(CLUSTER_IDLE_SHARE, f"(sum ({idle}) or {no_idle}) / (sum ({allocated}) > 0)"),
        ],
    }


def fairness_usage_group(p: RuleParams) -> dict[str, object]:
    """Return the rule group of the fairness report's per-step values, evaluated every `fairness.step`:
    the week figures sum these (`sum_over_time(rec[1w])`) instead of re-evaluating a subquery per step,
    which takes a minute for 200 teams. The evaluation-time series says when and at what interval the
    group ran, so the reader takes this path only for weeks the rules cover at the report's step."""
    f = FairnessQueries(p.queries, p.own)
    step = p.fairness_step
    return {
        "name": "watchtower.fairness.usage.rules",
        "interval": duration(step),
        "rules": [
            *(_rule(name, expr) for name, expr in f.recorded_rules(step, p.idle_threshold)),
            {"record": FAIRNESS_EVALUATION, "expr": "vector(time())", "labels": {"step": f"{step:g}"}},
        ],
    }
