"""The evaluator reuses a workload's status between ticks: it must answer exactly as a fresh one does."""

from __future__ import annotations

import random

import pytest
from msgspec.structs import replace

from tests.unit.domain.helpers import GPU_FULL, POLICY, T0
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.records import Condition, Event, Namespace, ObjectRef, OwnerRef, Pod
from watchtower.domain.state import ClusterState
from watchtower.domain.workloads import WorkloadKey

MESSAGES = [GPU_FULL, "0/4 nodes are available: 4 Insufficient cpu.", ""]


def random_pod(rnd: random.Random, i: int) -> Pod:
    job = rnd.randrange(12)
    owner = OwnerRef("PaddleJob", f"job-{job}", "batch.paddlepaddle.org/v1") if rnd.random() < 0.7 else None
    bound = rnd.random() < 0.4
    msg = rnd.choice(MESSAGES)
    return Pod(
        uid=f"u{i}",
        namespace=rnd.choice(["a", "b"]),
        name=f"p{i}",
        created=T0 + rnd.randrange(1000),
        phase="Running" if bound else rnd.choice(["Pending", "Pending", "Succeeded"]),
        priority=rnd.choice([0, 500_000, 1_000_000]),
        gpus=rnd.choice([0, 1, 8]),
        node="n1" if bound else "",
        nominated_node=rnd.choice(["", "", "n1"]),
        owner=owner,
        scheduling_gated=rnd.random() < 0.1,
        scheduled=Condition("True", since=T0 + 2000)
        if bound
        else (Condition("False", "Unschedulable", msg, T0) if msg else None),
        disruption=Condition("True", "PreemptionByScheduler", since=T0 + 1500)
        if bound and rnd.random() < 0.2
        else None,
        deleted_at=T0 + 1500 if rnd.random() < 0.1 else None,
    )


@pytest.mark.parametrize("seed", range(8))
def test_reused_statuses_equal_fresh_ones_through_random_changes(seed):
    rnd = random.Random(seed)
    state = ClusterState()
    reusing = QueueEvaluator(POLICY)
    now = T0 + 3000.0
    for step in range(60):
        action = rnd.random()
        if action < 0.6 or not state.pods:
            state.upsert_pod(random_pod(rnd, rnd.randrange(40)))
        elif action < 0.75:
            uid = rnd.choice(sorted(state.pods))
            state.delete_pod(uid)
        elif action < 0.85:
            state.upsert_namespace(Namespace(rnd.choice(["a", "b"]), rnd.choice(["", "t1", "t2"])))
        elif action < 0.95:
            job = rnd.randrange(12)
            state.upsert_event(
                Event(
                    uid=f"e{step}",
                    namespace="a",
                    reason="FailedCreate",
                    type="Warning",
                    message='pods "x" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=8, '
                    "used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8",
                    regarding=ObjectRef("PaddleJob", "a", f"job-{job}"),
                    first=now - 100,
                    last=now,
                )
            )
        else:
            uid = rnd.choice(sorted(state.pods))
            state.upsert_pod(replace(state.pods[uid], nominated_node="n2"))
        now += rnd.choice([0.0, 15.0, 600.0])
        for include_running in (False, True):
            got = reusing.evaluate(state, now=now, include_running=include_running)
            want = QueueEvaluator(POLICY).evaluate(state, now=now, include_running=include_running)
            assert got == want, f"step {step}"
        # A second tick with nothing changed but the clock must also agree.
        got = reusing.evaluate(state, now=now + 7, include_running=False)
        assert got == QueueEvaluator(POLICY).evaluate(state, now=now + 7)


def test_an_earlier_snapshot_is_not_changed_by_a_later_tick():
    state = ClusterState()
    state.upsert_pod(
        Pod("u1", "a", "p", T0, gpus=1, scheduled=Condition("False", "Unschedulable", GPU_FULL, T0))
    )
    ev = QueueEvaluator(POLICY)
    first = ev.evaluate(state, now=T0 + 10)
    second = ev.evaluate(state, now=T0 + 20)
    assert (first.workloads[0].wait_seconds, second.workloads[0].wait_seconds) == (10, 20)


def test_a_change_the_evaluator_had_not_read_when_the_log_forgot_it_still_shows():
    # The service drops the change log's read entries every tick (services/queue_tracker.py); an evaluator that
    # had not read them (another reader's tick) must start over, not read a slice from the wrong place.
    state = ClusterState()
    pending = Pod("u1", "a", "p", T0, gpus=1, scheduled=Condition("False", "Unschedulable", GPU_FULL, T0))
    state.upsert_pod(pending)
    ev = QueueEvaluator(POLICY)
    assert [w.facts.pods_pending for w in ev.evaluate(state, now=T0 + 10).workloads] == [1]
    state.upsert_pod(replace(pending, uid="u2", name="q"))
    state.upsert_pod(replace(pending, gpus=8))
    state.log.forget_before(state.log.changes_end)
    got = ev.evaluate(state, now=T0 + 20)
    assert got == QueueEvaluator(POLICY).evaluate(state, now=T0 + 20)
    assert sorted((w.facts.key.name, w.facts.gpus_per_pod) for w in got.workloads) == [("p", 8), ("q", 1)]


def test_a_new_namespace_gives_its_workloads_their_team_without_every_reader_starting_over():
    # A namespace gives its workloads nothing but their team: its arrival touches its own workloads (a pod-less
    # PaddleJob included), not all of them, so at 150,000 pods a team's new namespace costs a walk of the keys,
    # not a re-derivation of everything by every reader.
    from tests.unit.domain.test_gangs import classes, paddle_job, put
    from watchtower.domain.change_log import ChangeCursor

    state = ClusterState()
    classes(state)
    put(state, paddle_job())  # in the fixture's namespace, with no pods
    held = [k for h in state.forms.pod_less for k in h.held(state)]
    assert len(held) == 1
    ns = held[0].namespace
    for i in range(3):
        state.upsert_pod(
            Pod(
                f"o{i}",
                "other",
                f"p{i}",
                T0,
                gpus=1,
                scheduled=Condition("False", "Unschedulable", GPU_FULL, T0),
            )
        )
    state.upsert_pod(
        Pod("m", ns, "mine", T0, gpus=1, scheduled=Condition("False", "Unschedulable", GPU_FULL, T0))
    )
    ev = QueueEvaluator(POLICY)
    before = ev.evaluate(state, now=T0 + 60)
    assert {w.facts.team for w in before.workloads} == {ns, "other"}  # no label: the namespace is the team
    cursor = ChangeCursor()
    cursor.read(state.log)

    state.upsert_namespace(Namespace(ns, "vision"))

    touched = cursor.read(state.log)
    assert touched is not None, "a new namespace made the log's readers start over"
    assert touched == {held[0], WorkloadKey(ns, "Pod", "mine")}
    got = ev.evaluate(state, now=T0 + 60)
    assert got == QueueEvaluator(POLICY).evaluate(state, now=T0 + 60)
    assert sorted((w.facts.key.name, w.facts.team) for w in got.workloads) == [
        ("mine", "vision"),
        ("ocr-train", "vision"),
        ("p0", "other"),
        ("p1", "other"),
        ("p2", "other"),
    ]
