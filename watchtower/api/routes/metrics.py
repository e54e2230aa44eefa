"""Prometheus exposition of Watchtower's own metrics."""

from __future__ import annotations

from fastapi import APIRouter, Response

from ..deps import ContainerDep

router = APIRouter(tags=["metrics"])


@router.get("/metrics", response_class=Response)
def metrics(container: ContainerDep) -> Response:
    # Prometheus 3 refuses a scrape without a Content-Type it knows: set it exactly.
    return Response(container.metrics.render(), headers={"Content-Type": container.metrics.content_type})
