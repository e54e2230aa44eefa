"""The engine's models of what Kubernetes' controllers and users do around a quota and a preemption: the
controllers' backoff when a quota refuses a pod, pods made one at a time, a job deleted before it started,
a job's own termination grace. Pure engine runs on small traces."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.unit.replay.test_engine import job, run


def test_a_refused_job_retries_after_its_backoff_and_a_newcomer_takes_the_room_meanwhile() -> None:
    jobs = [job("a", 0, 100, gpus=4), job("b", 1, 100, gpus=4), job("c", 105, 100, gpus=4)]
    # Admitted the moment the quota has room: b takes a's room at 100, c waits for b.
    out = run(jobs, quotas={"t": 4})
    assert (out["b"].started, out["c"].started) == (100, 200)
    # The controller of b retries at 1, 11, 31, 71, 151, 311 s (10 s doubling): c, made at 105, finds the
    # room a left at 100, and b has it only at its retry after c ends.
    out = run(jobs, quotas={"t": 4}, quota_retry={"initial": 10, "max": 300})
    assert (out["c"].started, out["b"].started) == (105, 311)


def test_pods_made_one_at_a_time_hold_their_part_of_the_quota() -> None:
    jobs = [job("a", 0, 100, gpus=2), job("gang", 1, 50, gpus=2, pods=2), job("c", 2, 10, gpus=2)]
    whole = run(jobs, quotas={"t": 4}, quota_retry={"initial": 10, "max": 300})
    assert whole["c"].started == 2  # the gang asked all 4 at once and was refused: c found 2 free
    one_by_one = run(jobs, quotas={"t": 4}, quota_retry={"initial": 10, "max": 300, "per_pod": True})
    # The gang's first pod took the 2 free GPUs of the quota: c waits for a to end.
    assert one_by_one["c"].started is not None and one_by_one["c"].started >= 100


def test_a_job_deleted_before_it_started_leaves_the_queue_and_its_quota() -> None:
    jobs = [
        job("a", 0, 100, gpus=8),
        replace(job("gone", 1, 100, gpus=8), deleted=50),
        job("b", 2, 10, gpus=8),
    ]
    out = run(jobs)
    assert out["gone"].started is None and out["gone"].finished is None and out["gone"].waited == 49
    assert out["b"].started == 100


def test_the_preemptor_waits_for_its_victims_own_grace() -> None:
    low = replace(job("low", 0, 1000, gpus=8), grace=600.0)
    out = run([low, job("high", 100, 50, gpus=8, tier="high")], termination_grace="30s")
    assert out["high"].started == 700


def test_pods_no_gang_holds_together_are_placed_one_by_one_each_holding_its_node() -> None:
    jobs = [job("one", 0, 100, gpus=1), job("pair", 1, 50, gpus=4, pods=2), job("small", 2, 200, gpus=4)]
    nodes = {"count": 2, "gpus": 4}
    whole = run(jobs, nodes=nodes)
    # Placed whole, the pair waits for two free nodes: small takes the empty one, the pair waits for it.
    assert (whole["small"].started, whole["pair"].started) == (2, 202)
    one_by_one = run(jobs, nodes=nodes, gangs="declared")
    # Its first pod takes the empty node at once and holds it idle: small waits for the pair to end.
    assert (one_by_one["pair"].started, one_by_one["small"].started) == (100, 150)
    assert one_by_one["pair"].waited == 99
    assert one_by_one["pair"].gpu_hours == pytest.approx((4 * 99 + 8 * 50) / 3600)


def test_the_placed_pods_of_a_waiting_job_are_preempted_as_any_bound_pod() -> None:
    jobs = [
        job("blocker", 0, 1000, gpus=4),
        job("pair", 1, 50, gpus=4, pods=2),
        job("high", 10, 100, gpus=4, tier="high"),
    ]
    out = run(jobs, gangs="declared", termination_grace="30s")
    # The pair's lone pod is the newest low pod: it goes, the blocker runs on.
    assert (out["high"].started, out["pair"].preemptions, out["blocker"].preemptions) == (40, 1, 0)
    assert out["pair"].started == 1000  # its controller made the pod again; it waits for the blocker


def test_people_delete_a_job_their_quota_refused_for_too_long() -> None:
    jobs = [job("a", 0, 10_000, gpus=4), job("b", 1, 100, gpus=4)]
    patient = run(jobs, quotas={"t": 4}, quota_retry={"initial": 10, "max": 300})
    assert patient["b"].started is not None and patient["b"].started >= 10_000
    out = run(jobs, quotas={"t": 4}, quota_retry={"initial": 10, "max": 300, "give_up_after": "2h"})
    assert out["b"].started is None and out["b"].finished is None and out["b"].waited == 7200


def test_a_preempted_job_placed_pod_by_pod_loses_only_the_pods_in_the_way() -> None:
    jobs = [
        job("pair", 0, 1000, gpus=4, pods=2),
        job("high", 10, 100, gpus=4, tier="high"),
        job("other", 50, 10, gpus=4),
    ]
    nodes = {"count": 2, "gpus": 4}
    whole = run(jobs, nodes=nodes, termination_grace="30s", restart={"mode": "resume"})
    # A gang goes whole: its other node is free for `other` at once.
    assert (whole["high"].started, whole["other"].started) == (40, 50)
    one_by_one = run(jobs, nodes=nodes, termination_grace="30s", restart={"mode": "resume"}, gangs="declared")
    # One pod goes; the other holds its node, idle, until the high job ends and the lost pod runs again.
    assert (one_by_one["high"].started, one_by_one["pair"].preemptions) == (40, 1)
    assert one_by_one["pair"].finished == 140 + 990 and one_by_one["other"].started == 1130


def test_a_bare_pod_its_quota_refuses_is_turned_away_and_a_controllers_pod_waits() -> None:
    bare = replace(job("bare", 1, 100, gpus=4), controller=False)
    made = job("made", 1, 100, gpus=4)
    retry = {"initial": 10, "max": 300}
    out = run([job("a", 0, 50, gpus=4), bare], quotas={"t": 4}, quota_retry=retry)
    # `kubectl create` gets the quota's error: the pod is never made, it waits for nothing.
    assert out["bare"].started is None and out["bare"].deleted == 1 and out["bare"].waited == 0
    out = run([job("a", 0, 50, gpus=4), made], quotas={"t": 4}, quota_retry=retry)
    assert out["made"].started == 71  # its controller retries at 11, 31, 71 s


def test_a_preempted_pod_made_again_is_charged_again_and_the_room_may_go_to_another_job_first() -> None:
    jobs = [
        job("low", 0, 1000, gpus=8),
        job("high", 100, 100, gpus=8, tier="high", team="u"),
        job("new", 120, 10, gpus=8),  # same team as low: its quota (8) is full while low's pod stops
    ]
    policy = {
        "quotas": {"t": 8},
        "quota_retry": {"initial": 10, "max": 300},
        "termination_grace": "30s",
        "restart": {"mode": "resume"},
    }
    out = run(jobs, **policy)
    # low's pod is gone at 130 and its quota with it; new's controller, due at 130 too and first in line,
    # is charged for it: new runs once high ends (230-240), and low's controller, refused at 130, makes its
    # pod again at its retry at 280 (10, 20, 40, 80 s after) and runs its 900 s left.
    assert out["high"].started == 130
    assert (out["new"].started, out["new"].finished) == (230, 240)
    assert out["low"].finished == 280 + 900
