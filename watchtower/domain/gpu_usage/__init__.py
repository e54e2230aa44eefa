"""Idle-allocated GPUs: which workloads hold GPUs they do not use, and whether better work waits for them.

Figures come from Prometheus (DCGM utilisation, kube-state-metrics allocation) as plain `Sample`s; the verdict
also reads the queue (a `QueueSnapshot`). When Prometheus cannot be read the last figures are kept, marked
`stale`, and the alerts they raised are held rather than resolved: silence from a monitor is not good news.
"""

from __future__ import annotations

from .alerts import IDLE_ALERT, UNREACHABLE_ALERT, GpuAlert, PrometheusHealth, idle_alerts, unreachable_alert
from .records import (
    DeviceId,
    DeviceUsage,
    IdlePolicy,
    PodAllocation,
    Sample,
    UsageView,
    WorkloadUsage,
    allocations_from_samples,
    devices_from_samples,
)
from .verdict import IdleWhileWaiting, idle_while_waiting, recheck_while_stale
from .view import is_idle, usage_view

__all__ = [
    "IDLE_ALERT",
    "UNREACHABLE_ALERT",
    "DeviceId",
    "DeviceUsage",
    "GpuAlert",
    "IdlePolicy",
    "IdleWhileWaiting",
    "PodAllocation",
    "PrometheusHealth",
    "Sample",
    "UsageView",
    "WorkloadUsage",
    "allocations_from_samples",
    "devices_from_samples",
    "idle_alerts",
    "idle_while_waiting",
    "is_idle",
    "recheck_while_stale",
    "unreachable_alert",
    "usage_view",
]
