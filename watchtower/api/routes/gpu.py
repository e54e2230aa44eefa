"""Idle-allocated GPUs: `/api/v1/gpu/idle`, the GPU-usage service's report (DCGM utilisation via Prometheus)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, HTTPException

from ..deps import ContainerDep
from ..schemas import IdleGpuReport, Problem

router = APIRouter(prefix="/api/v1", tags=["gpu"])

NOT_CONFIGURED = (
    "GPU utilisation is not available: no prometheus section is configured "
    "(set prometheus.url to the Prometheus that scrapes the DCGM exporter and kube-state-metrics)"
)


@router.get("/gpu/idle", response_model=IdleGpuReport, responses={404: {"model": Problem}})
async def idle_gpus(container: ContainerDep) -> dict[str, Any]:
    """Workloads holding GPUs that stayed under the idle threshold for the window, and whether equal or
    higher-tier work waits meanwhile. `stale: true` when Prometheus could not be read lately."""
    if container.gpu is None:
        raise HTTPException(404, NOT_CONFIGURED)
    return container.gpu.report()
