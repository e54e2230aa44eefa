"""WorkloadWaitWarning / WorkloadWaitCritical: a waiting workload past its tier's thresholds."""

from __future__ import annotations

import pytest

from tests.unit.domain.alerts.builders import (
    CRITICAL_AFTER,
    MINUTE,
    T0,
    WARN_AFTER,
    by_workload,
    cluster,
    evaluate_queue,
    gang_pod,
    names,
    rule_input,
    snapshot,
    workload,
)
from watchtower.domain.alerts.rules import tiered_wait
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue import WorkloadState

WARNING = ("WorkloadWaitWarning", "warning")
CRITICAL = ("WorkloadWaitCritical", "critical")


def fire(*workloads):
    return tiered_wait.evaluate(rule_input(snapshot(*workloads)))


@pytest.mark.parametrize("tier", ["critical", "high", "medium", "low"])
def test_the_warning_fires_when_the_wait_reaches_the_tiers_warn_after_not_a_second_before(tier):
    assert fire(workload(tier=tier, wait=WARN_AFTER[tier] - 1)) == []
    assert names(fire(workload(tier=tier, wait=WARN_AFTER[tier]))) == [WARNING]


@pytest.mark.parametrize("tier", ["critical", "high", "medium", "low"])
def test_past_critical_after_the_critical_fires_beside_the_warning(tier):
    assert names(fire(workload(tier=tier, wait=CRITICAL_AFTER[tier] - 1))) == [WARNING]
    assert names(fire(workload(tier=tier, wait=CRITICAL_AFTER[tier]))) == [WARNING, CRITICAL]


def test_the_labels_name_the_workload_its_team_tier_class_and_gpus():
    (a,) = fire(workload("train", tier="high", gpus=32, wait=20 * MINUTE))
    assert dict(a.labels) == {
        "alertname": "WorkloadWaitWarning",
        "severity": "warning",
        "namespace": "vision",
        "team": "vision-team",
        "workload": "train",
        "kind": "PaddleJob",
        "tier": "high",
        "priority_class": "high-priority",
        "gpus": "32",
    }


def test_the_summary_says_what_waits_how_long_and_which_threshold_it_passed():
    warn, crit = fire(workload("train", tier="high", gpus=8, wait=70 * MINUTE))
    assert warn.annotations["summary"] == (
        "PaddleJob vision/train (high tier, 8 GPU) has waited 1h10m, over its warning threshold of 15m"
    )
    assert crit.annotations["summary"] == (
        "PaddleJob vision/train (high tier, 8 GPU) has waited 1h10m, over its critical threshold of 1h"
    )
    assert (warn.annotations["wait_seconds"], warn.annotations["threshold_seconds"]) == ("4200", "900")
    assert crit.annotations["threshold_seconds"] == "3600"


def test_the_description_says_why_whether_preemption_helps_and_who_is_ahead():
    (a,) = fire(
        workload(
            tier="medium",
            wait=40 * MINUTE,
            why="0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
            preemption=PreemptionVerdict.NO_VICTIMS,
            ahead=5,
            ahead_higher_tier=2,
        )
    )
    d = a.annotations["description"]
    assert "Why: 0/4 nodes are available: 4 Insufficient nvidia.com/gpu." in d
    assert "preemption cannot help: no lower-priority pods to evict" in d
    assert "2 higher-tier workload(s) are ahead of it in the queue (5 in all)." in d
    assert a.annotations["preemption"] == "no_victims"
    assert a.annotations["ahead_higher_tier"] == "2"


def test_a_pods_display_notes_travel_with_the_alert():
    (a,) = fire(workload(wait=20 * MINUTE, annotations={"watchtower.io/note": "ask #ml-infra"}))
    assert a.annotations["note_watchtower.io/note"] == "ask #ml-infra"


@pytest.mark.parametrize("state", [WorkloadState.GATED, WorkloadState.QUOTA_BLOCKED, WorkloadState.RUNNING])
def test_gated_quota_blocked_and_running_workloads_never_alert_as_waiting(state):
    assert fire(workload(state=state, tier="critical", wait=24 * 3600)) == []


def test_a_partly_placed_gang_still_waits_and_alerts():
    w = workload(state=WorkloadState.PARTIAL, wait=20 * MINUTE, gpus_held=16, pods_running=2, pods_pending=2)
    assert names(fire(w)) == [WARNING]


def test_a_gang_of_many_pending_pods_is_one_alert_per_workload_with_all_its_gpus():
    state = cluster()
    for i in range(4):
        state.upsert_pod(gang_pod("train", i, created=T0, tier="high", gpus=8))
    for i in range(2):
        state.upsert_pod(gang_pod("eval", i, created=T0, tier="high", gpus=2))
    snap = evaluate_queue(state, T0 + 20 * MINUTE)
    alerts = by_workload(tiered_wait.evaluate(rule_input(snap)))
    assert set(alerts) == {"train", "eval"}
    assert alerts["train"].labels["gpus"] == "32"
    assert alerts["eval"].labels["gpus"] == "4"
