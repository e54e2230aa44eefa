"""WorkloadQuotaBlocked: a controller whose pods a ResourceQuota refuses, so nothing is even queued."""

from __future__ import annotations

import pytest

from tests.unit.domain.alerts.builders import (
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
    queue_policy,
    quota_refusal,
    rule_input,
    snapshot,
    workload,
)
from tests.unit.domain.helpers import apply
from watchtower.domain.alerts.lifecycle import LifecyclePolicy, advance
from watchtower.domain.alerts.rules import quota_blocked
from watchtower.domain.queue import QueueEvaluator, WorkloadState
from watchtower.domain.records import Controller, Event, ObjectRef, PriorityClass

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


def test_past_critical_after_the_warning_stays_beside_the_critical_alert_rather_than_resolving():
    # The warning's labels are unchanged, so it neither resolves nor fires again as the block escalates.
    assert names(fire(blocked(CRITICAL_AFTER["high"] - 1))) == [(NAME, "warning")]
    assert names(fire(blocked(CRITICAL_AFTER["high"]))) == [(NAME, "warning"), (NAME, "critical")]


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


# --- a Job refused for three hours, as the Job controller retries it ----------------------------------------

JOB_POD_GPUS = 2
STORY_END = T0 + 3 * HOUR  # the quota is raised: the last refusal, then the missing pods are created


def refusal_story():
    """Yield (time, objects) for a 4-pod Job of the high tier whose quota admits 2 pods: the controller
    retries the rest with back-off (10 s doubling to 5 min) and one refused message per used count; at 1 h
    30 a running pod succeeds and is replaced; at 3 h the quota is raised and the missing pods created."""
    from watchtower.simulator import objects as o

    owner = o.owner_ref("Job", "train", api_version="batch/v1", uid="uid-job-train")
    involved = {
        "kind": "Job",
        "namespace": NS,
        "name": "train",
        "uid": "uid-job-train",
        "apiVersion": "batch/v1",
    }

    def job_pod(i, created, phase="Running"):
        return o.pod(
            name=f"train-{i}", namespace=NS, created=created, uid=f"uid-train-{i}", gpus=JOB_POD_GPUS,
            priority=PRIORITY["high"], owner=owner, node="gpu-0", phase=phase,
            conditions=[o.scheduled(created + 5)], start_time=created + 6, running_since=created + 20,
        )  # fmt: skip

    events: dict[int, dict] = {}

    def refused(at, used):
        msg = (
            f'Error creating: pods "train-" is forbidden: exceeded quota: team-gpus, requested: '
            f"requests.nvidia.com/gpu={JOB_POD_GPUS}, used: requests.nvidia.com/gpu={used}, "
            "limited: requests.nvidia.com/gpu=4"
        )
        ev = events.get(used)
        if ev is None or ev["message"] != msg:
            ev = events[used] = o.core_event(
                namespace=NS, reason="FailedCreate", message=msg, involved=involved, at=at, type_="Warning",
                component="job-controller", name=f"train.{used}",
            )  # fmt: skip
        else:  # the recorder folds a repeat into the same event: count and lastTimestamp move
            ev = {**ev, "count": ev["count"] + 1, "lastTimestamp": o.ts(at)}
            events[used] = ev
        return ev

    yield T0, [o.node("gpu-0", gpus=8), job_pod(0, T0), job_pod(1, T0), refused(T0, 4)]
    t, backoff, replaced = T0, 10.0, 0
    while t < STORY_END:
        t = min(t + backoff, STORY_END)
        backoff = min(300.0, backoff * 2)
        objs = [refused(t, 4)]
        if t >= T0 + 1.5 * HOUR and replaced < 2:
            # pod 1 succeeds; the next retry creates its replacement, then the 4th pod is refused again
            objs = [job_pod(1, T0, phase="Succeeded")] if replaced == 0 else [job_pod(4, t), refused(t, 4)]
            replaced += 1
        yield t, objs
    yield STORY_END + 10, [job_pod(2, STORY_END + 10), job_pod(3, STORY_END + 10)]


def quota_alert_transitions(story, *, every=60.0):
    """Return [(minutes since T0, severity, state)] of the rule's alerts, evaluated every `every` seconds
    by one evaluator (incremental, as the service runs it) through the alert lifecycle."""
    state = cluster()
    evaluator = QueueEvaluator(queue_policy())
    tracked: dict = {}
    out = []
    steps = list(story)
    now, i = T0, 0
    while now <= steps[-1][0] + 30 * MINUTE:
        while i < len(steps) and steps[i][0] <= now:
            for obj in steps[i][1]:
                apply(state, obj)
            i += 1
        snap = evaluator.evaluate(state, now=now)
        tracked, changes = advance(
            tracked, quota_blocked.evaluate(rule_input(snap)), now=now, policy=LifecyclePolicy()
        )
        out += [((now - T0) / MINUTE, c.alert.severity, c.alert.state.value) for c in changes]
        now += every
    return out


def test_a_job_refused_for_hours_with_back_off_fires_once_per_severity_and_resolves_once():
    got = quota_alert_transitions(refusal_story())
    # No `for`: pending and firing in the same evaluation. High tier: warns after 15m, critical after 1h.
    assert got == [
        (15.0, "warning", "firing"),
        (60.0, "critical", "firing"),
        (181.0, "warning", "resolved"),
        (181.0, "critical", "resolved"),
    ]


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
    state.control.upsert_controller(
        Controller(NS, "Job", "sweep", "uid-sweep", None, "online-serving", None, 4, 4, 1)
    )
    state.upsert_event(refused_job(T0 + after))
    # Past critical_after the warning stays beside the critical alert (muted by it), so pick by severity.
    alerts = quota_blocked.evaluate(rule_input(evaluate_queue(state, T0 + after)))
    (a,) = [x for x in alerts if x.severity == severity]
    assert (a.labels["workload"], a.labels["kind"], a.labels["tier"], a.severity) == (
        "sweep",
        "Job",
        "high",
        severity,
    )
    assert (a.labels["priority_class"], a.labels["gpus"]) == ("online-serving", "4")
