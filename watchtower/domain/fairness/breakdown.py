"""Shares of the cluster: a team's GPU, CPU and memory hours over the cluster's (the largest is its dominant
resource), and where the cluster's GPU-hours went (busy, idle-allocated, planned, free, unavailable)."""

from __future__ import annotations

from .report import GpuHoursBreakdown
from .shares import ratio
from .usage import TeamUsage, UsageFigures


def resource_shares(tu: TeamUsage | None, usage: UsageFigures | None) -> dict[str, float | None]:
    """Return the team's GPU, CPU and memory hours as shares of the cluster's (None where unknown)."""
    c = usage.cluster if usage is not None else None
    if tu is None or c is None:
        return {"gpu": None, "cpu": None, "memory": None}
    return {
        "gpu": ratio(tu.gpu_hours, c.capacity_gpu_hours),
        "cpu": ratio(tu.cpu_core_hours, c.cpu_core_hours),
        "memory": ratio(tu.memory_gib_hours, c.memory_gib_hours),
    }


def gpu_hours_breakdown(usage: UsageFigures | None) -> GpuHoursBreakdown:
    """Return where the cluster's GPU-hours went; a part whose inputs are missing is None."""
    c = usage.cluster if usage is not None else None
    if c is None:
        return GpuHoursBreakdown(None, None, None, None, None, None)
    busy = None
    if c.allocated_gpu_hours is not None and c.idle_allocated_gpu_hours is not None:
        busy = max(0.0, c.allocated_gpu_hours - c.idle_allocated_gpu_hours)
    free_idle = None
    parts = (
        c.capacity_gpu_hours,
        c.allocated_gpu_hours,
        c.free_while_waiting_gpu_hours,
        c.unavailable_gpu_hours,
    )
    if all(p is not None for p in parts):
        cap, alloc, planned, down = (float(p or 0.0) for p in parts)
        free_idle = max(0.0, cap - alloc - planned - down)
    return GpuHoursBreakdown(
        capacity=c.capacity_gpu_hours,
        allocated_busy=busy,
        allocated_idle=c.idle_allocated_gpu_hours,
        planned=c.free_while_waiting_gpu_hours,
        free_idle=free_idle,
        unavailable=c.unavailable_gpu_hours,
    )
