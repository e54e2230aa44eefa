"""The queue pages and one workload's detail.

`Queue` is composed: its common keys (`CommonQueue`), then each registered form's sections (its `queue_shape`,
domain/forms/<form>/shapes.py) in the registry's order, as services/queue_json.py places them; both models
hold the composed `Workload`.
"""

from __future__ import annotations

from functools import cache

from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm

from .common import Body, Time
from .preemption import Preemption
from .shapes import compose, section_fields
from .workload import CommonWorkload, workload_model


class CommonQueue(Body):
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
    workloads: list[CommonWorkload]
    """the page"""


class CommonWorkloadDetail(Body):
    """`/api/v1/workloads/{namespace}/{name}`: one workload, running or waiting, and its pods' preemptions."""

    workload: CommonWorkload
    """the workload, running or waiting"""
    preemptions: list[Preemption]
    """the preemptions its pods suffered in `queue.preemption_window`, newest first"""


@cache
def queue_models(forms: tuple[QueueForm, ...]) -> tuple[type[Body], type[Body]]:
    """Return the `Queue` and `WorkloadDetail` models of these forms, both holding their `Workload`."""
    workload = workload_model(forms)
    swap = (CommonWorkload, workload)
    queue = compose("Queue", CommonQueue, section_fields(forms), after="workloads", swap=swap)
    detail = compose("WorkloadDetail", CommonWorkloadDetail, {}, swap=swap)
    return queue, detail


Queue, WorkloadDetail = queue_models(registry.FORMS)
