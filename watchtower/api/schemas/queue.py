"""The queue pages and one workload's detail."""

from __future__ import annotations

from .common import Body, Time
from .preemption import Preemption
from .workload import Workload


class Queue(Body):
    """`/api/v1/queue`: one page of the tracked workloads in display order (tier, waiting first, longest wait).

    Served as bytes prebuilt per evaluation (api/documents.py), never validated per request: this model
    describes the body for /openapi.json, and the tests check the bytes against it."""

    schema_version: int
    """`1`, as in `watchtower analyze`"""
    at: Time | None
    """the evaluation time"""
    total: int
    """workloads matching the filters"""
    offset: int
    """the first of them on this page"""
    count: int
    """workloads on this page (`offset`, `limit`)"""
    workloads: list[Workload]
    """the page"""


class WorkloadDetail(Body):
    """`/api/v1/workloads/{namespace}/{name}`: one workload, running or waiting, and its pods' preemptions."""

    workload: Workload
    """the workload, running or waiting"""
    preemptions: list[Preemption]
    """the preemptions its pods suffered in `queue.preemption_window`, newest first"""
