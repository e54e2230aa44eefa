"""paddle-operator's own words: a Warning event on a PaddleJob that waits before its pods is its why.

Shaped from paddle-operator controllers/paddlejob_controller.go: createResource records Warning
"Create" "create failed <kind> <name>" (the kind is read before the create and is often empty) as
"paddlejob-controller" (main.go GetEventRecorderFor); Normal "Created" on success.
"""

from __future__ import annotations

from typing import Any

from tests.unit.domain.helpers import NS, POLICY, T0, apply
from tests.unit.domain.test_gangs import classes, load, only, paddle_job, put
from watchtower.domain.queue import QueueEvaluator, WorkloadState
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o

JOB = WorkloadKey(NS, "PaddleJob", "ocr-train")
JOB_UID = "0b0b0b0b-1111-4222-8333-444455556666"
REFUSED = "create failed  ocr-train-worker-0"  # as the operator formats it for a typed Pod with no kind


def operator_event(
    at: float,
    *,
    reason: str = "Create",
    message: str = REFUSED,
    type_: str = "Warning",
    component: str = "paddlejob-controller",
    uid: str = JOB_UID,
) -> dict[str, Any]:
    return o.core_event(
        namespace=NS,
        reason=reason,
        message=message,
        type_=type_,
        component=component,
        involved={
            "kind": "PaddleJob",
            "namespace": NS,
            "name": "ocr-train",
            "uid": uid,
            "apiVersion": "batch.paddlepaddle.org/v1",
        },
        at=at,
    )


def waiting_job(*events: dict[str, Any]) -> ClusterState:
    state = ClusterState()
    classes(state)
    put(state, paddle_job())
    for ev in events:
        apply(state, ev)
    return state


def test_the_operators_warning_is_the_why_of_a_paddlejob_with_no_pods() -> None:
    w = only(waiting_job(operator_event(T0 + 30)), T0 + 600)
    assert (w.key, w.state, w.source) == (JOB, WorkloadState.PENDING, "paddlejob")
    assert w.why == "paddle-operator: Create: create failed ocr-train-worker-0"


def test_the_newest_warning_is_kept_whatever_order_they_arrive_in() -> None:
    newer = operator_event(T0 + 300, reason="Delete", message="delete failed  ocr-train-worker-1")
    state = waiting_job(newer, operator_event(T0 + 30))
    assert list(state.control.operator_warnings) == [JOB]  # at most one per workload
    assert only(state, T0 + 600).why == "paddle-operator: Delete: delete failed ocr-train-worker-1"


def test_past_the_event_ttl_the_warning_is_dropped_by_the_same_evaluator() -> None:
    state = waiting_job(operator_event(T0 + 30))
    evaluator = QueueEvaluator(POLICY)
    [w] = evaluator.evaluate(state, now=T0 + 600).waiting()
    assert w.why.startswith("paddle-operator: ")
    [w] = evaluator.evaluate(state, now=T0 + 30 + 3601).waiting()  # the API server dropped it by now
    assert w.why == "no pods created yet"


def test_normal_events_other_components_and_an_older_jobs_warning_are_not_its_words() -> None:
    state = waiting_job(
        operator_event(
            T0 + 30, reason="Created", message="created Service ocr-train-worker-0", type_="Normal"
        ),
        operator_event(T0 + 40, component="kueue-admission"),
        operator_event(T0 + 50, uid="an-older-job-of-that-name"),
    )
    assert only(state, T0 + 600).why == "no pods created yet"


def test_the_quota_numbers_come_before_the_operators_words() -> None:
    state = waiting_job(operator_event(T0 + 30))
    quota = load("resourcequota-gpu")
    quota["metadata"]["namespace"] = NS
    put(state, quota)
    w = only(state, T0 + 600)
    assert w.state is WorkloadState.QUOTA_BLOCKED and w.why.startswith("ResourceQuota ")


def test_a_hostile_message_is_kept_on_one_line_and_bounded() -> None:
    state = waiting_job(operator_event(T0 + 30, message="create failed\n\n" + "x" * 5000))
    why = only(state, T0 + 600).why
    assert "\n" not in why and why.startswith("paddle-operator: Create: create failed xxx")
    assert len(why) <= len("paddle-operator: Create: ") + 1024


def test_a_deleted_paddlejob_forgets_its_warning() -> None:
    state = waiting_job(operator_event(T0 + 30))
    apply(state, paddle_job(), deleted=True)
    assert state.control.operator_warnings == {}
