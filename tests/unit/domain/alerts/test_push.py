"""Which alerts are pushed to Alertmanager when, as Prometheus's rule manager decides (rules/alerting.go)."""

from __future__ import annotations

from watchtower.domain.alerts.model import AlertState, TrackedAlert, fingerprint
from watchtower.domain.alerts.push import VALID_FOR, PushPolicy, due, postable

POLICY = PushPolicy(resend_interval=60.0, evaluation_interval=15.0)


def _a(state: AlertState, resolved_at: float | None = None, name: str = "w") -> TrackedAlert:
    labels = {"alertname": "WorkloadWaitWarning", "workload": name, "gpus": "8"}
    return TrackedAlert(fingerprint(labels), labels, {"summary": "s"}, state, 0.0, 100.0, 10.0, resolved_at)


def test_firing_alerts_go_at_once_then_every_resend_interval_and_pending_ones_never():
    firing, waiting = _a(AlertState.FIRING), _a(AlertState.PENDING, name="p")
    assert due([firing, waiting], {}, now=100.0, policy=POLICY) == [firing]
    sent = {firing.fingerprint: 100.0}
    assert due([firing], sent, now=159.0, policy=POLICY) == []
    assert due([firing], sent, now=160.0, policy=POLICY) == [firing]  # a minute later: again


def test_a_resolve_goes_at_once_and_is_repeated_for_fifteen_minutes_only():
    resolved = _a(AlertState.RESOLVED, resolved_at=200.0)
    assert due([resolved], {resolved.fingerprint: 190.0}, now=200.0, policy=POLICY) == [resolved]
    sent = {resolved.fingerprint: 200.0}
    assert due([resolved], sent, now=230.0, policy=POLICY) == []
    assert due([resolved], sent, now=260.0, policy=POLICY) == [resolved]
    assert due([resolved], {resolved.fingerprint: 1000.0}, now=200.0 + 901, policy=POLICY) == []


def test_a_firing_alert_stays_valid_for_four_of_the_longer_interval_and_a_resolved_one_ends_when_it_resolved():
    assert POLICY.valid_for == 240.0
    assert PushPolicy(resend_interval=10.0, evaluation_interval=30.0).valid_for == 120.0
    doc = postable(_a(AlertState.FIRING), policy=POLICY, external_url="https://wt")
    assert doc[VALID_FOR] == 240.0 and "endsAt" not in doc
    assert doc["labels"] == {"alertname": "WorkloadWaitWarning", "workload": "w"}
    assert doc["annotations"] == {"gpus": "8", "summary": "s"}
    done = postable(_a(AlertState.RESOLVED, resolved_at=200.5), policy=POLICY, external_url="")
    assert done["endsAt"] == "1970-01-01T00:03:20.5Z" and VALID_FOR not in done
