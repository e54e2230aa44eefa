"""WorkloadPreemptionThrash: a workload preempted again and again, losing its work each time.

Built from pods the way the watch reports them (preempted, then gone), so that the queue's count and the
rule's read the same preemptions."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import (
    MINUTE,
    T0,
    THRASH_WINDOW,
    cluster,
    evaluate_queue,
    gang_pod,
    names,
    preempt,
    preempted_by,
    rule_input,
    settings,
)
from watchtower.domain.alerts.rules import preemption_thrash

NAME = "WorkloadPreemptionThrash"


def thrash(state, now, **changes):
    snap = evaluate_queue(state, now, thrashing_running=True)
    return preemption_thrash.evaluate(rule_input(snap, now=now, rule_settings=settings(**changes)))


def waiting_again(state, job="train", *, pods=1, gpus=8):
    """The controller recreated the preempted pods; they wait to be scheduled again."""
    for i in range(pods):
        state.upsert_pod(gang_pod(job, i, created=T0 - 100, gpus=gpus))


def test_three_preemptions_within_the_window_alert_two_do_not():
    state = cluster()
    waiting_again(state)
    preempt(state, "train", T0 - 50 * MINUTE)
    preempt(state, "train", T0 - 25 * MINUTE)
    assert thrash(state, T0 + 20) == []
    preempt(state, "train", T0 + 10)
    (a,) = thrash(state, T0 + 20)
    assert names([a]) == [(NAME, "warning")]
    assert a.annotations["preemptions"] == "3"
    assert a.annotations["summary"] == "PaddleJob vision/train was preempted 3 times in 1h"


def test_a_preemption_counts_until_it_is_exactly_the_window_old():
    state = cluster()
    waiting_again(state)
    for at in (T0, T0 + 10 * MINUTE, T0 + 20 * MINUTE):
        preempt(state, "train", at)
    assert len(thrash(state, T0 + THRASH_WINDOW)) == 1
    assert thrash(state, T0 + THRASH_WINDOW + 1) == []


def test_the_pods_of_a_gang_preempted_together_are_one_preemption_of_the_workload():
    state = cluster()
    waiting_again(state, pods=4)
    preempt(state, "train", T0 - 40 * MINUTE, pods=4)
    preempt(state, "train", T0 - 20 * MINUTE, pods=4)
    assert thrash(state, T0) == []  # 8 pods evicted, but the workload was preempted twice
    preempt(state, "train", T0 - 1 * MINUTE, pods=4)
    (a,) = thrash(state, T0)
    assert a.annotations["preemptions"] == "3"


def test_the_threshold_is_the_configured_count():
    state = cluster()
    waiting_again(state)
    preempt(state, "train", T0 - 30 * MINUTE)
    preempt(state, "train", T0 - 10 * MINUTE)
    assert len(thrash(state, T0, thrash_count=2)) == 1
    assert thrash(state, T0, thrash_count=3) == []


def test_the_description_names_who_preempted_it_last_and_on_which_node():
    state = cluster()
    waiting_again(state)
    preempt(state, "train", T0 - 40 * MINUTE)
    preempt(state, "train", T0 - 20 * MINUTE)
    (last,) = preempt(state, "train", T0 - 5 * MINUTE, node_name="gpu-3")
    preempted_by(state, last, ns="ml-infra", name="urgent-debug", node_name="gpu-3", at=T0 - 5 * MINUTE)
    (a,) = thrash(state, T0)
    assert a.annotations["description"].endswith("Last preempted by ml-infra/urgent-debug on node gpu-3.")
    assert "(alert at 3)" in a.annotations["description"]


def test_one_alert_per_thrashing_workload_labelled_as_the_waiting_workload():
    state = cluster()
    waiting_again(state, "train", pods=4)
    waiting_again(state, "calm", pods=1)
    for minutes in (50, 30, 10):
        preempt(state, "train", T0 - minutes * MINUTE, pods=4)
    preempt(state, "calm", T0 - 10 * MINUTE)
    (a,) = thrash(state, T0)
    assert dict(a.labels) == {
        "alertname": NAME,
        "severity": "warning",
        "namespace": "vision",
        "team": "vision-team",
        "workload": "train",
        "kind": "PaddleJob",
        "tier": "low",
        "priority_class": "low-priority",
        "gpus": "32",
    }


def test_a_workload_running_again_still_alerts_from_its_preemption_records():
    state = cluster()  # no pod of it waits: it is not in the snapshot at all
    for minutes in (50, 30, 10):
        preempt(state, "train", T0 - minutes * MINUTE)
    (a,) = thrash(state, T0)
    assert (a.labels["workload"], a.labels["tier"], a.labels["priority_class"]) == (
        "train",
        "low",
        "low-priority",
    )
    assert a.annotations["preemptions"] == "3"


def test_the_alert_keeps_its_identity_when_the_thrashing_workload_starts_running():
    state = cluster()
    waiting_again(state)
    for minutes in (50, 30, 10):
        preempt(state, "train", T0 - minutes * MINUTE)
    (waiting,) = thrash(state, T0)
    state.upsert_pod(gang_pod("train", 0, created=T0 - 100, node_name="gpu-1"))
    (running,) = thrash(state, T0 + 60)
    assert dict(running.labels) == dict(waiting.labels)


def test_a_gang_evicted_within_a_second_across_a_minute_boundary_is_one_preemption():
    state = cluster()
    waiting_again(state, pods=4)
    preempt(state, "train", T0 - 30 * MINUTE, pods=4)
    preempt(state, "train", T0 + 59.6, pods=2)
    preempt(state, "train", T0 + 60.2, pods=2, first=2)
    assert thrash(state, T0 + 2 * MINUTE) == []


def test_a_workload_evicted_every_50_seconds_counts_each_eviction_past_the_first_minute():
    """Gaps chained one to the next would make an hour of evictions 50 s apart one preemption."""
    state = cluster()
    waiting_again(state)
    for i in range(6):  # at 0, 50, ..., 250 s: bursts start at 0, 100 (>60 after 0), 200
        preempt(state, "train", T0 - 30 * MINUTE + 50 * i)
    (a,) = thrash(state, T0)
    assert a.annotations["preemptions"] == "3"
