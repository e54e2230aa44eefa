"""One workload: its status, why it waits, and the preemptions its pods suffered."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from watchtower.domain.forms import registry
from watchtower.services.queue_json import workload_dict
from watchtower.services.queue_tracker import QueueTracker

from ..deps import DocumentsDep, QueueTrackerDep
from ..documents import QueueDocuments
from ..schemas import Problem
from ..schemas.queue import queue_models


def lookup(
    docs: QueueDocuments, tracker: QueueTracker, namespace: str, name: str, kind: str | None
) -> list[dict[str, Any]]:
    """Return the documents of every workload called namespace/name (of `kind`, when given): the tick's,
    else worked out now (a tick evaluates waiting workloads only, a running one is not in it)."""
    found = [r.doc for r in docs.find(namespace, name) if kind is None or r.kind == kind]
    if not found:
        found = [
            workload_dict(st)
            for st in tracker.find(namespace, name, now=docs.tick.at)
            if kind is None or st.kind == kind
        ]
    return found


def not_found(namespace: str, name: str, kind: str | None) -> str:
    """Return why namespace/name has no page or document, in words."""
    return (
        f"no workload {namespace}/{name}{f' of kind {kind}' if kind else ''} in the queue "
        "(Watchtower tracks GPU workloads that wait or run; finished ones are forgotten)"
    )


def preemptions_of(docs: QueueDocuments, namespace: str, name: str, kind: str) -> list[dict[str, Any]]:
    """Return the preemptions (as the API shows them) whose victim pod belonged to this workload."""
    return [
        p
        for p in docs.preemptions
        if p["victim_namespace"] == namespace
        and p["victim_workload"] is not None
        and p["victim_workload"]["name"] == name
        and p["victim_workload"]["kind"] == kind
    ]


def get_workload(
    namespace: str,
    name: str,
    docs: DocumentsDep,
    tracker: QueueTrackerDep,
    kind: Annotated[
        str | None, Query(description="PaddleJob, Job, VolcanoJob, ... when a name is ambiguous")
    ] = None,
) -> dict[str, Any]:
    found = lookup(docs, tracker, namespace, name, kind)
    if not found:
        raise HTTPException(404, not_found(namespace, name, kind))
    if len(found) > 1:
        kinds = ", ".join(sorted(d["kind"] for d in found))
        raise HTTPException(409, f"{namespace}/{name} names several workloads ({kinds}): add ?kind=")
    doc = found[0]
    # Checked against the route's `WorkloadDetail` model (every key declared) as FastAPI answers.
    return {"workload": doc, "preemptions": preemptions_of(docs, namespace, name, doc["kind"])}


def build_router() -> APIRouter:
    """Return the workload's route, its body the `WorkloadDetail` model of the forms registered now (a form's
    keys are in /openapi.json; api/schemas/queue.py)."""
    _, detail = queue_models(registry.FORMS)
    router = APIRouter(prefix="/api/v1", tags=["workloads"])
    router.add_api_route(
        "/workloads/{namespace}/{name}",
        get_workload,
        methods=["GET"],
        response_model=detail,
        responses={404: {"model": Problem}, 409: {"model": Problem}},
    )
    return router
