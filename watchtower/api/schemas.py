"""Response bodies of the API (data transfer objects, apart from the domain types).

The queue and workload bodies are the `watchtower analyze` JSON shapes (services/queue_view.py, documented
in docs/json.md) so that a script reads both the same way; they are described here for the OpenAPI page.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel


class Problem(BaseModel):
    detail: str


class Health(BaseModel):
    status: str


class Readiness(BaseModel):
    ready: bool
    problems: list[str]
    stale_seconds: float | None
    stale_after_seconds: float
    evaluated_at: float | None
    skipped_objects: dict[str, int]
    kinds: dict[str, dict[str, Any]]


class Queue(BaseModel):
    schema_version: int
    at: str | None
    total: int  # matching the filters
    offset: int
    count: int  # in this page (offset, limit)
    workloads: list[dict[str, Any]]


class WorkloadDetail(BaseModel):
    workload: dict[str, Any]
    preemptions: list[dict[str, Any]]


class Preemptions(BaseModel):
    at: str | None
    count: int
    preemptions: list[dict[str, Any]]
