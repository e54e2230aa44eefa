"""`/api/v1/gpu/idle`: the GPU-usage service's report (`GpuUsageService.report`)."""

from __future__ import annotations

from .common import Body, Number, Time


class PrometheusStatus(Body):
    url: str
    """the Prometheus read"""
    up: bool
    """the latest read succeeded"""
    last_success: Time | None
    """the latest successful read"""
    consecutive_failures: int
    """failed reads since the last success"""
    last_error: str | None
    """the latest failure's message"""


class IdleWorkload(Body):
    """A workload holding GPUs, with how much of them stayed under the idle threshold for the window."""

    namespace: str
    """the workload's namespace"""
    kind: str
    """its kind (`PaddleJob`, `Job`, ..., `Pod`)"""
    name: str
    """its name"""
    team: str
    """its namespace's team"""
    pods: list[str]
    """its running pods that hold GPUs"""
    gpus_allocated: Number
    """GPUs its pods requested (kube-state-metrics)"""
    gpus: int
    """whole GPUs DCGM sees in use by it"""
    slices: int
    """MIG slices DCGM sees in use by it"""
    idle_gpus: int
    """of `gpus`, those idle for the whole window"""
    idle_slices: int
    """of `slices`, those idle for the whole window"""
    idle_gpu_equivalent: Number
    """whole idle GPUs plus each idle slice's share of a GPU"""
    util_avg_percent: Number
    """mean utilisation over the window across its devices"""


class IdleWhileWaiting(IdleWorkload):
    """An idle holder while work of an equal or higher tier waits."""

    tier: str
    """the idle workload's tier"""
    highest_waiting_tier: str
    """the highest tier that waits meanwhile"""
    waiting: list[str]
    """the waiting workloads, `namespace/kind/name`"""


class IdleGpuReport(Body):
    """Workloads holding GPUs that stayed under the idle threshold for the window, and whether equal or
    higher-tier work waits meanwhile."""

    prometheus: PrometheusStatus
    """the Prometheus read, and how the reads went"""
    threshold_percent: Number
    """utilisation under which a device counts as idle (`prometheus.idle_threshold`)"""
    window_seconds: Number
    """how long it must stay under it (`prometheus.idle_window`)"""
    available: bool
    """a reading exists (false until the first successful read)"""
    stale: bool
    """Prometheus could not be read lately: the figures are from `as_of`"""
    as_of: Time | None
    """when the figures were read"""
    idle_gpus: int
    """idle whole GPUs, all workloads"""
    idle_slices: int
    """idle MIG slices, all workloads"""
    idle_workloads: list[IdleWorkload]
    """the workloads with idle GPUs or slices"""
    idle_while_waiting: list[IdleWhileWaiting]
    """of those, the ones idle while equal or higher-tier work waits"""
    unmonitored_pods: list[str]
    """running pods holding GPUs that DCGM reports no series for, `namespace/pod`"""
    skipped_series: int
    """series without the labels or value a decision needs"""
