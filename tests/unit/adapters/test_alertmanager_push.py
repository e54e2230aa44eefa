"""The push sender's view of time: a firing alert's endsAt counts from when the request leaves, and a
message that waited past two resends sends only its resolves (later messages restate the firing ones)."""

from __future__ import annotations

from watchtower.adapters.alertmanager_push import wire_alerts
from watchtower.domain.alerts.outbox import OutboxMessage
from watchtower.domain.alerts.push import VALID_FOR

FIRING = {"labels": {"alertname": "A"}, "startsAt": "1970-01-01T00:00:10Z", VALID_FOR: 240.0}
RESOLVED = {
    "labels": {"alertname": "B"},
    "startsAt": "1970-01-01T00:00:10Z",
    "endsAt": "1970-01-01T00:01:40Z",
}


def _msg(created: float) -> OutboxMessage:
    return OutboxMessage(
        1, "k", "alertmanager/push/0", "alertmanager-push", {"alerts": [FIRING, RESOLVED]}, created
    )


def test_a_fresh_message_sends_firing_alerts_valid_from_the_moment_it_leaves():
    out = wire_alerts(_msg(100.0), now=130.0, stale_after=120.0)
    assert out[0] == {
        "labels": {"alertname": "A"},
        "startsAt": "1970-01-01T00:00:10Z",
        "endsAt": "1970-01-01T00:06:10Z",
    }
    assert out[1] == RESOLVED


def test_a_message_that_waited_out_an_outage_sends_only_its_resolves():
    assert wire_alerts(_msg(100.0), now=221.0, stale_after=120.0) == [RESOLVED]
