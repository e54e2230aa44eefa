"""Recent preemptions: victim, preemptor, node, GPU-hours lost, and whether each helped its preemptor."""

from __future__ import annotations

from typing import Annotated

import orjson
from fastapi import APIRouter, Query, Response

from ..deps import DocumentsDep
from ..schemas import Preemptions

router = APIRouter(prefix="/api/v1", tags=["preemptions"])


# Declared, not validated (as the queue): the rows are JSON-ready dicts built once per tick, and validating
# 10,000 of them into models on each request would triple its cost.
@router.get("/preemptions", response_model=Preemptions)
def get_preemptions(
    docs: DocumentsDep,
    namespace: Annotated[str | None, Query(description="victim namespace")] = None,
    limit: Annotated[int, Query(ge=1, le=10_000)] = 500,
) -> Response:
    rows = [p for p in docs.preemptions if namespace is None or p["victim_namespace"] == namespace]
    body = {"at": docs.at, "count": len(rows), "preemptions": rows[:limit]}
    return Response(orjson.dumps(body), media_type="application/json")
