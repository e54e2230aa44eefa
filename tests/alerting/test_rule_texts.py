"""What the rules say agrees with what the queue says: the preemption verdict in the same words, once."""

from __future__ import annotations

from watchtower.config.model import Settings
from watchtower.domain.alerts.rules import RuleInput, evaluate_rules
from watchtower.domain.messages import PREEMPTION_WORDS, PreemptionVerdict

from .helpers import T0, pending, snapshot


def test_a_wait_alert_words_the_verdict_as_the_queue_does_and_only_once():
    s = Settings()
    snap, _ = snapshot([pending("train", "low", T0 - 3 * 3600)], T0, s)
    (w,) = snap.workloads
    words = PREEMPTION_WORDS[PreemptionVerdict.NO_VICTIMS]
    assert w.preemption is PreemptionVerdict.NO_VICTIMS and words in w.why
    got = evaluate_rules(RuleInput(snapshot=snap, now=T0, tiers=s.tier_policy()))
    (alert,) = [a for a in got if a.alertname == "WorkloadWaitWarning"]
    assert alert.annotations["description"].count(words) == 1
