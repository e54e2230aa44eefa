"""One workload: its status, why it waits, and the preemptions its pods suffered."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, HTTPException, Query

from watchtower.services.queue_view import workload_dict

from ..deps import DocumentsDep, WatcherDep
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
    watcher: WatcherDep,
    kind: Annotated[
        str | None, Query(description="PaddleJob, Job, VolcanoJob, ... when a name is ambiguous")
    ] = None,
) -> WorkloadDetail:
    found = [r.doc for r in docs.find(namespace, name) if kind is None or r.kind == kind]
    if not found:
        # A tick evaluates waiting workloads only; a running one is worked out now, for this request.
        found = [
            workload_dict(st)
            for st in watcher.find(namespace, name, now=docs.tick.at)
            if kind is None or st.kind == kind
        ]
    if not found:
        raise HTTPException(
            404,
            f"no workload {namespace}/{name}{f' of kind {kind}' if kind else ''} in the queue "
            "(Watchtower tracks GPU workloads that wait or run; finished ones are forgotten)",
        )
    if len(found) > 1:
        kinds = ", ".join(sorted(d["kind"] for d in found))
        raise HTTPException(409, f"{namespace}/{name} names several workloads ({kinds}): add ?kind=")
    doc = found[0]
    preemptions = [
        p
        for p in docs.preemptions
        if p["victim_namespace"] == namespace
        and p["victim_workload"] is not None
        and p["victim_workload"]["name"] == name
        and p["victim_workload"]["kind"] == doc["kind"]
    ]
    return WorkloadDetail(workload=doc, preemptions=preemptions)
