"""WorkloadGangStalled: part of a gang holds GPUs while the rest waits, so none of them does any work."""

from __future__ import annotations

import pytest

from tests.unit.domain.alerts.builders import (
    GANG_STALL_AFTER,
    HOUR,
    MINUTE,
    T0,
    cluster,
    evaluate_queue,
    gang_pod,
    names,
    rule_input,
    settings,
    snapshot,
    workload,
)
from watchtower.domain.alerts.rules import gang_stall
from watchtower.domain.queue import WorkloadState

NAME = "WorkloadGangStalled"


def partial(wait, *, kind="PaddleJob", held=16, running=2, pending=2):
    return workload(
        kind=kind,
        state=WorkloadState.PARTIAL,
        wait=wait,
        gpus=32,
        gpus_held=held,
        pods_running=running,
        pods_pending=pending,
        why="gang partly placed: 2 pod(s) hold 16 GPU(s), 0/4 nodes are available",
    )


def fire(*workloads, **changes):
    return gang_stall.evaluate(rule_input(snapshot(*workloads), rule_settings=settings(**changes)))


def test_a_partly_placed_gang_alerts_once_its_rest_has_waited_gang_stall_after():
    assert fire(partial(GANG_STALL_AFTER - 1)) == []
    assert names(fire(partial(GANG_STALL_AFTER))) == [(NAME, "warning")]


def test_the_summary_says_how_many_gpus_sit_idle_and_how_many_pods_wait():
    (a,) = fire(partial(25 * MINUTE, held=16, pending=2))
    assert (
        a.annotations["summary"] == "PaddleJob vision/train holds 16 GPU(s) idle while 2 pod(s) wait for 25m"
    )
    assert a.annotations["gpus_held"] == "16"
    assert "(limit 10m)" in a.annotations["description"]


def test_the_limit_is_the_rules_own_not_the_tiers():
    # 20 minutes is past the high tier's warn_after (15m) but not the configured gang limit.
    assert fire(partial(20 * MINUTE), gang_stall_after=30 * MINUTE) == []
    assert names(fire(partial(30 * MINUTE), gang_stall_after=30 * MINUTE)) == [(NAME, "warning")]


@pytest.mark.parametrize("kind", ["PaddleJob", "VolcanoJob"])
def test_both_gang_kinds_stall(kind):
    assert len(fire(partial(HOUR, kind=kind))) == 1


@pytest.mark.parametrize("kind", ["Job", "ReplicaSet", "Pod"])
def test_a_partly_running_workload_that_is_no_gang_is_not_stalled(kind):
    # Its placed pods do work on their own.
    assert fire(partial(HOUR, kind=kind)) == []


@pytest.mark.parametrize("state", [WorkloadState.PENDING, WorkloadState.RUNNING, WorkloadState.GATED])
def test_a_gang_with_nothing_placed_or_everything_placed_is_not_stalled(state):
    assert fire(workload(state=state, wait=HOUR)) == []


def test_a_gang_half_placed_in_the_cluster_is_one_alert_with_the_gpus_its_placed_pods_hold():
    state = cluster()
    for i in range(2):
        state.upsert_pod(gang_pod("train", i, created=T0, gpus=8, node_name=f"gpu-{i}"))
    for i in range(2, 4):
        state.upsert_pod(gang_pod("train", i, created=T0, gpus=8))
    (a,) = gang_stall.evaluate(rule_input(evaluate_queue(state, T0 + 15 * MINUTE)))
    assert a.labels["workload"] == "train" and a.labels["gpus"] == "32"
    assert (
        a.annotations["summary"] == "PaddleJob vision/train holds 16 GPU(s) idle while 2 pod(s) wait for 15m"
    )
