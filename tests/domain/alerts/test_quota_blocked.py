"""WorkloadQuotaBlocked: a controller whose pods a ResourceQuota refuses, so nothing is even queued."""

from __future__ import annotations

import pytest

from watchtower.domain.alerts.rules import quota_blocked
from watchtower.domain.model import Controller, Event, ObjectRef, PriorityClass
from watchtower.domain.queue import WorkloadState

from .builders import (
    CRITICAL_AFTER,
    HOUR,
    MINUTE,
    NS,
    PRIORITY,
    T0,
    WARN_AFTER,
    cluster,
    evaluate_queue,
    names,
    quota_refusal,
    rule_input,
    snapshot,
    workload,
)

NAME = "WorkloadQuotaBlocked"


def blocked(wait, *, tier="high", quota="gpu-quota"):
    return workload(
        tier=tier,
        state=WorkloadState.QUOTA_BLOCKED,
        wait=wait,
        pods_pending=0,
        quota=quota_refusal(quota=quota),
        why=f"refused by ResourceQuota {quota}: requests.nvidia.com/gpu requested 8, used 16 of 16",
    )


def fire(*workloads):
    return quota_blocked.evaluate(rule_input(snapshot(*workloads)))


def test_a_refusal_alerts_once_it_has_lasted_the_tiers_warn_after():
    assert fire(blocked(WARN_AFTER["high"] - 1)) == []
    assert names(fire(blocked(WARN_AFTER["high"]))) == [(NAME, "warning")]


def test_past_critical_after_the_one_alert_turns_critical_rather_than_a_second_firing():
    assert names(fire(blocked(CRITICAL_AFTER["high"] - 1))) == [(NAME, "warning")]
    assert names(fire(blocked(CRITICAL_AFTER["high"]))) == [(NAME, "critical")]


def test_the_summary_names_the_quota_and_how_long_it_has_refused():
    (a,) = fire(blocked(20 * MINUTE, quota="team-gpus"))
    assert (
        a.annotations["summary"]
        == "PaddleJob vision/train has been refused by ResourceQuota team-gpus for 20m"
    )
    assert a.annotations["quota"] == "team-gpus"
    assert "Nothing is queued: the scheduler never sees it." in a.annotations["description"]
    assert a.labels["workload"] == "train" and a.labels["tier"] == "high"


@pytest.mark.parametrize("state", [WorkloadState.PENDING, WorkloadState.PARTIAL, WorkloadState.GATED])
def test_a_workload_that_has_pods_in_the_queue_is_not_quota_blocked(state):
    assert fire(workload(state=state, wait=10 * HOUR)) == []


def test_a_failed_create_event_from_the_controller_becomes_the_alert():
    state = cluster()
    state.upsert_event(
        Event(
            uid="ev-1",
            namespace=NS,
            reason="FailedCreate",
            message='Error creating: pods "train-worker-0" is forbidden: exceeded quota: team-gpus, '
            "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=16, "
            "limited: requests.nvidia.com/gpu=16",
            regarding=ObjectRef("PaddleJob", NS, "train", "uid-train", "batch.paddlepaddle.org/v1"),
            first=T0,
            last=T0 + 2 * HOUR,
            count=40,
        )
    )
    # No PriorityClass is the cluster default, so the refused job is of the lowest tier: warns after 2h.
    (a,) = quota_blocked.evaluate(rule_input(evaluate_queue(state, T0 + 2 * HOUR)))
    assert (a.labels["workload"], a.labels["tier"], a.severity) == ("train", "low", "warning")
    assert a.annotations["quota"] == "team-gpus"
    assert "requests.nvidia.com/gpu requested 8, used 16 of 16" in a.annotations["description"]


def refused_job(at: float) -> Event:
    return Event(
        uid="ev-sweep",
        namespace=NS,
        reason="FailedCreate",
        message='Error creating: pods "sweep-x7k2p" is forbidden: exceeded quota: team-gpus, '
        "requested: requests.nvidia.com/gpu=4, used: requests.nvidia.com/gpu=16, "
        "limited: requests.nvidia.com/gpu=16",
        regarding=ObjectRef("Job", NS, "sweep", "uid-sweep", "batch/v1"),
        first=T0,
        last=at,
        count=5,
    )


@pytest.mark.parametrize(
    ("after", "severity"), [(WARN_AFTER["high"], "warning"), (CRITICAL_AFTER["high"], "critical")]
)
def test_a_refused_job_of_the_high_tier_alerts_at_the_high_tiers_thresholds(after, severity):
    """No pod, so the tier is its template's class: not the lowest tier's 2 h / 8 h, 8 times too late."""
    state = cluster()
    state.upsert_priority_class(PriorityClass("online-serving", PRIORITY["high"]))
    state.upsert_controller(
        Controller(NS, "Job", "sweep", "uid-sweep", None, "online-serving", None, 4, 4, 1)
    )
    state.upsert_event(refused_job(T0 + after))
    (a,) = quota_blocked.evaluate(rule_input(evaluate_queue(state, T0 + after)))
    assert (a.labels["workload"], a.labels["kind"], a.labels["tier"], a.severity) == (
        "sweep",
        "Job",
        "high",
        severity,
    )
    assert (a.labels["priority_class"], a.labels["gpus"]) == ("online-serving", "4")
