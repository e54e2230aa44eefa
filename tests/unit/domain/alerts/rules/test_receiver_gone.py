"""WatchtowerReceiverGone: a webhook answered 410 Gone, so Watchtower stopped sending to it."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import names, rule_input, snapshot
from watchtower.domain.alerts.rules import receiver_gone

NAME = "WatchtowerReceiverGone"


def fire(gone):
    return receiver_gone.evaluate(rule_input(snapshot(), gone_receivers=gone))


def test_nothing_fires_while_every_receiver_is_enabled():
    assert fire({}) == []


def test_each_disabled_integration_is_one_warning_naming_it():
    alerts = fire({"team-b/webhook/0": "410 Gone at 08:00", "team-a/webhook/1": "410 Gone at 07:00"})
    assert names(alerts) == [(NAME, "warning"), (NAME, "warning")]
    assert [a.labels["integration"] for a in alerts] == ["team-a/webhook/1", "team-b/webhook/0"]
    assert len({a.fingerprint for a in alerts}) == 2


def test_it_says_which_endpoint_is_off_why_and_how_to_enable_it_again():
    (a,) = fire({"team-a/webhook/0": "https://hooks.example/x answered 410 Gone"})
    assert dict(a.labels) == {
        "alertname": NAME,
        "severity": "warning",
        "namespace": "",
        "team": "watchtower",
        "integration": "team-a/webhook/0",
    }
    assert a.annotations["summary"] == (
        "Notifications to team-a/webhook/0 are disabled: the endpoint answered 410 Gone"
    )
    assert a.annotations["description"].startswith("https://hooks.example/x answered 410 Gone. Fix")
    assert "POST /api/v1/receivers/<receiver>/enable" in a.annotations["description"]
