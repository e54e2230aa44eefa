"""Recent preemptions: victim, preemptor, node, GPU-hours lost."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from watchtower.services.queue_view import rfc3339

from ..deps import PictureDep
from ..schemas import Preemptions

router = APIRouter(prefix="/api/v1", tags=["preemptions"])


@router.get("/preemptions", response_model=Preemptions)
def get_preemptions(
    picture: PictureDep,
    namespace: Annotated[str | None, Query(description="victim namespace")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 500,
) -> Preemptions:
    rows = [p for p in picture.preemptions if namespace is None or p["victim_namespace"] == namespace]
    return Preemptions(at=rfc3339(picture.snapshot.at), count=len(rows), preemptions=rows[:limit])
