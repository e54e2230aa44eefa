"""What the rules say agrees with what the queue says: the preemption count and its window, the verdict's
words."""

from __future__ import annotations

from tests.alerting.helpers import (
    NO_FIT,
    T0,
    apply,
    paddle_owner,
    pending,
    pending_pod,
    running_pod,
    snapshot,
    state_of,
)
from watchtower.config import settings_from_mapping
from watchtower.config.model import Settings
from watchtower.domain.alerts.rules import RuleInput, evaluate_rules
from watchtower.domain.messages.scheduler import PREEMPTION_WORDS, PreemptionVerdict
from watchtower.domain.queue import QueueEvaluator
from watchtower.domain.state import ClusterState
from watchtower.simulator import objects as o

NS = "vision"


def _preempted(state: ClusterState, i: int, at: float) -> None:
    v = running_pod(
        f"train-worker-{i}", "gpu-0", ns=NS, uid=f"v{i}", created=at - 600, gpus=8, priority=100_000,
        priority_class="batch", owner=paddle_owner("train"), deletion=at,
    )  # fmt: skip
    v["status"]["conditions"].append(
        o.condition("DisruptionTarget", "True", at, reason="PreemptionByScheduler")
    )
    apply(state, v, deleted=True)


def _thrash_alerts(s: Settings, state: ClusterState, now: float):
    snap = QueueEvaluator(s.queue_policy()).evaluate(state, now=now)
    got = evaluate_rules(RuleInput(snapshot=snap, now=now, tiers=s.tier_policy(), settings=s.rule_settings()))
    return snap, [a for a in got if a.alertname == "WorkloadPreemptionThrash"]


def test_the_thrash_alert_counts_in_the_window_it_names_the_queues_own():
    state = state_of(o.node("gpu-0", gpus=8))
    waiting = pending_pod(
        "train-worker-0", ns=NS, uid="again", created=T0 - 100, gpus=8, priority=100_000,
        priority_class="batch", owner=paddle_owner("train"), message=NO_FIT,
    )  # fmt: skip
    apply(state, waiting)
    for i, ago in enumerate((5000, 4000, 100), start=1):
        _preempted(state, i, T0 - ago)

    two_hours = settings_from_mapping({"queue": {"thrash_window": "2h"}}, env={})
    snap, (alert,) = _thrash_alerts(two_hours, state, T0)
    (w,) = snap.workloads
    assert w.preemptions_recent == 3 and alert.annotations["preemptions"] == "3"
    assert "preempted 3 times in 2h" in alert.annotations["summary"]

    # In the default hour only the last one counts, for the queue and for the alert alike.
    snap, alerts = _thrash_alerts(Settings(), state, T0)
    assert snap.workloads[0].preemptions_recent == 1 and alerts == []


def test_a_wait_alert_words_the_verdict_as_the_queue_does_and_only_once():
    s = Settings()
    snap, _ = snapshot([pending("train", "low", T0 - 3 * 3600)], T0, s)
    (w,) = snap.workloads
    words = PREEMPTION_WORDS[PreemptionVerdict.NO_VICTIMS]
    assert w.preemption is PreemptionVerdict.NO_VICTIMS and words in w.why
    got = evaluate_rules(RuleInput(snapshot=snap, now=T0, tiers=s.tier_policy(), settings=s.rule_settings()))
    (alert,) = [a for a in got if a.alertname == "WorkloadWaitWarning"]
    assert alert.annotations["description"].count(words) == 1
