"""The series every query reads: the exporters' metric and label names, Watchtower's own `watchtower_*`
series, and the recording rules Watchtower ships.

One name, one place: the metrics adapter exports Watchtower's series under these names, the rule generators
record under them, and the query builders (own.py, exporters.py, fairness.py) read them back.
"""

from __future__ import annotations

# dcgm-exporter's metrics and MIG labels; kube-state-metrics' (sanitised) GPU resource name.
GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
GPU_RESOURCE = "nvidia_com_gpu"
MIG_PROFILE = "GPU_I_PROFILE"
MIG_INSTANCE = "GPU_I_ID"

# Watchtower's own series. Counters and histograms are named without the `_total`/`_bucket` the client
# library appends on exposition; queries add it (`total`, `bucket`).
PENDING_WORKLOADS = "watchtower_pending_workloads"
OLDEST_WAIT = "watchtower_oldest_wait_seconds"
PARTIAL_GANGS = "watchtower_partial_gangs"
PARTIAL_GANG_GPUS_HELD = "watchtower_partial_gang_gpus_held"
QUOTA_GPUS_USED = "watchtower_quota_gpus_used"
QUOTA_GPUS_HARD = "watchtower_quota_gpus_hard"
GATED_PODS = "watchtower_gated_pods"
GATED_WORKLOADS = "watchtower_gated_workloads"
NEVER_WORKLOADS = "watchtower_never_startable_workloads"  # tier, reason
FRAGMENTED_WORKLOADS = "watchtower_fragmented_workloads"
GPUS = "watchtower_gpus"
DRA_UNRESOLVED_PODS = "watchtower_dra_unresolved_pods"
LAST_EVALUATION = "watchtower_last_evaluation_timestamp_seconds"
WATCH_RESTARTS = "watchtower_watch_restarts"
PICTURE_STALENESS = "watchtower_picture_staleness_seconds"
TIME_TO_SCHEDULE = "watchtower_time_to_schedule_seconds"
STARTUP_LATENCY = "watchtower_startup_latency_seconds"
PREEMPTIONS = "watchtower_preemptions"
PREEMPTION_GPU_HOURS_LOST = "watchtower_preemption_gpu_hours_lost"
MALFORMED_OBJECTS_SKIPPED = "watchtower_malformed_objects_skipped"
OBJECTS_LEFT_OUT = "watchtower_objects_left_out"
EVALUATION_DURATION = "watchtower_evaluation_duration_seconds"
SNAPSHOT_CONSUMER_FAILURES = "watchtower_snapshot_consumer_failures"
NOTIFICATIONS_SENT = "watchtower_notifications_sent"
NOTIFICATIONS_FAILED = "watchtower_notifications_failed"
NOTIFICATIONS_RETRIED = "watchtower_notifications_retried"
OUTBOX_DEPTH = "watchtower_outbox_depth"
OUTBOX_OLDEST_UNDELIVERED = "watchtower_outbox_oldest_undelivered_seconds"
ALERTS_FIRING = "watchtower_alerts_firing"
OWNER_NOTICES = "watchtower_owner_notices"
OWNER_NOTICES_REFUSED = "watchtower_owner_notices_refused"
TEAM_PREEMPTIONS = "watchtower_team_preemptions"
TEAM_PREEMPTION_GPU_HOURS_LOST = "watchtower_team_preemption_gpu_hours_lost"
PREEMPTION_TO_RUNNING = "watchtower_preemption_to_running_seconds"
START_ESTIMATE_ERROR = "watchtower_start_estimate_error_ratio"
# What preemptions came to (domain/preemption_outcome.py): every judged victim by outcome, those that did not
# help by reason, the GPU-hours those threw away, and the records that could not be judged.
PREEMPTION_OUTCOMES = "watchtower_preemption_outcomes"
PREEMPTIONS_UNHELPFUL = "watchtower_preemptions_unhelpful"
PREEMPTIONS_UNHELPFUL_GPU_HOURS = "watchtower_preemptions_unhelpful_gpu_hours"
PREEMPTION_OUTCOME_SKIPS = "watchtower_preemption_outcome_skips"
DISRUPTIONS = "watchtower_disruptions"
THRASHING_WORKLOADS = "watchtower_thrashing_workloads"
MOST_PREEMPTIONS = "watchtower_workload_preemptions_max"
CONFIG_VALID = "watchtower_config_valid"
CONFIG_RELOADS = "watchtower_config_reload"
LEADER = "watchtower_leader"
LEADER_TRANSITIONS = "watchtower_leader_transitions"
# How late the event loop ran a timer (runtime/loop_lag.py): the latest measurement, and every one.
EVENT_LOOP_LAG = "watchtower_event_loop_lag_seconds"
EVENT_LOOP_LAGS = "watchtower_event_loop_wakeup_lag_seconds"
# The fairness gauges (domain/fairness/live.py computes them each tick), per team unless said.
WAITING_GPUS = "watchtower_waiting_gpus"  # team, tier: GPUs waiting work still needs
TEAM_OLDEST_WAIT = "watchtower_team_oldest_wait_seconds"  # team, tier
TEAM_GPUS_USED = "watchtower_team_gpus_used"
TEAM_GPUS_ENTITLED = "watchtower_team_gpus_entitled"
TEAM_GPUS_DEMAND = "watchtower_team_gpus_demand"
TEAM_GPUS_FAIR_SHARE = "watchtower_team_gpus_fair_share"
TEAM_SATISFACTION = "watchtower_team_satisfaction"  # only teams with demand: Jain's index is over them

# Recording rules shipped with the dashboards that read them (alerts/recording.py writes them).
TIME_TO_SCHEDULE_P50 = f"tier:{TIME_TO_SCHEDULE}:p50"
TIME_TO_SCHEDULE_P95 = f"tier:{TIME_TO_SCHEDULE}:p95"
JAIN_INDEX = f"cluster:{TEAM_SATISFACTION}:jain_index"
TEAM_ATTAINMENT = "team:watchtower_gpu_attainment:ratio"
TEAM_IDLE_SHARE = "team:watchtower_idle_allocated_gpus:ratio"
CLUSTER_IDLE_SHARE = "cluster:watchtower_idle_allocated_gpus:ratio"
# The fairness report's per-step values (group watchtower.fairness.usage.rules, evaluated every
# `fairness.step`): the week figures integrate these instead of subqueries (FairnessQueries.recorded).
FAIRNESS_TEAM_GPUS = "team:watchtower_fairness_gpus:step"
FAIRNESS_TEAM_IDLE_GPUS = "team:watchtower_fairness_idle_gpus:step"
FAIRNESS_TEAM_CPU_CORES = "team:watchtower_fairness_cpu_cores:step"
FAIRNESS_TEAM_MEMORY_BYTES = "team:watchtower_fairness_memory_bytes:step"
FAIRNESS_TEAM_QUOTA_GPUS = "team:watchtower_fairness_quota_gpus:step"
FAIRNESS_CAPACITY_GPUS = "cluster:watchtower_fairness_capacity_gpus:step"
FAIRNESS_ALLOCATED_GPUS = "cluster:watchtower_fairness_allocated_gpus:step"
FAIRNESS_IDLE_ALLOCATED_GPUS = "cluster:watchtower_fairness_idle_allocated_gpus:step"
FAIRNESS_FREE_WHILE_WAITING_GPUS = "cluster:watchtower_fairness_free_while_waiting_gpus:step"
FAIRNESS_UNAVAILABLE_GPUS = "cluster:watchtower_fairness_unavailable_gpus:step"
FAIRNESS_CAPACITY_CPU_CORES = "cluster:watchtower_fairness_capacity_cpu_cores:step"
FAIRNESS_CAPACITY_MEMORY_BYTES = "cluster:watchtower_fairness_capacity_memory_bytes:step"
# vector(time()) with a `step` label: when the group ran (its evaluation offset within the step) and at
# what interval, whatever the cluster sent; counting its samples gives the hours the rules cover.
FAIRNESS_EVALUATION = "cluster:watchtower_fairness_evaluation_timestamp:step"


def total(counter: str) -> str:
    """Return the exposed name of a counter: `watchtower_preemptions` → `watchtower_preemptions_total`."""
    return counter + "_total"


def bucket(histogram: str) -> str:
    """Return the name of a histogram's bucket series."""
    return histogram + "_bucket"
