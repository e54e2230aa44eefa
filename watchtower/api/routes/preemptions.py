"""Recent preemptions: victim, preemptor, node, GPU-hours lost."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from ..deps import DocumentsDep
from ..schemas import Preemptions

router = APIRouter(prefix="/api/v1", tags=["preemptions"])


@router.get("/preemptions", response_model=Preemptions)
def get_preemptions(
    docs: DocumentsDep,
    namespace: Annotated[str | None, Query(description="victim namespace")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 500,
) -> Preemptions:
    rows = [p for p in docs.preemptions if namespace is None or p["victim_namespace"] == namespace]
    return Preemptions(at=docs.at, count=len(rows), preemptions=rows[:limit])
