"""One workload: its status, why it waits, and the preemptions its pods suffered."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from ..deps import DocumentsDep
from ..schemas import Problem, WorkloadDetail

router = APIRouter(prefix="/api/v1", tags=["workloads"])


@router.get(
    "/workloads/{namespace}/{name}",
    response_model=WorkloadDetail,
    responses={404: {"model": Problem}, 409: {"model": Problem}},
)
def get_workload(
    namespace: str,
    name: str,
    docs: DocumentsDep,
    kind: Annotated[
        str | None, Query(description="PaddleJob, Job, VolcanoJob, ... when a name is ambiguous")
    ] = None,
) -> WorkloadDetail:
    rows = docs.find(namespace, name)
    if kind is not None:
        rows = [r for r in rows if r.kind == kind]
    if not rows:
        raise HTTPException(
            404,
            f"no workload {namespace}/{name}{f' of kind {kind}' if kind else ''} in the queue "
            "(Watchtower tracks GPU workloads that wait or run; finished ones are forgotten)",
        )
    if len(rows) > 1:
        kinds = ", ".join(sorted(r.kind for r in rows))
        raise HTTPException(409, f"{namespace}/{name} names several workloads ({kinds}): add ?kind=")
    row = rows[0]
    preemptions = [
        p
        for p in docs.picture.preemptions
        if p["victim_namespace"] == namespace
        and p["victim_workload"] is not None
        and p["victim_workload"]["name"] == name
        and p["victim_workload"]["kind"] == row.kind
    ]
    return WorkloadDetail(workload=row.doc, preemptions=preemptions)
