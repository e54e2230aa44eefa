"""WatchtowerKubernetesUnreachable: Watchtower's own picture of the cluster goes stale."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import (
    MINUTE,
    T0,
    UNREACHABLE_AFTER,
    names,
    rule_input,
    settings,
    snapshot,
)
from watchtower.domain.alerts.rules import WatchHealth, self_health

NAME = "WatchtowerKubernetesUnreachable"


def fire(health, *, now=T0, **changes):
    return self_health.evaluate(
        rule_input(snapshot(), now=now, health=health, rule_settings=settings(**changes))
    )


def test_a_healthy_or_unknown_watch_raises_nothing():
    assert fire(None) == []
    assert fire(WatchHealth(unhealthy_since=None, detail="")) == []


def test_it_fires_critical_once_the_watch_has_failed_for_unreachable_after():
    down = WatchHealth(unhealthy_since=T0, detail="")
    assert fire(down, now=T0 + UNREACHABLE_AFTER - 1) == []
    assert names(fire(down, now=T0 + UNREACHABLE_AFTER)) == [(NAME, "critical")]


def test_it_is_watchtowers_own_alert_about_no_workload():
    (a,) = fire(WatchHealth(unhealthy_since=T0, detail=""), now=T0 + 5 * MINUTE)
    assert dict(a.labels) == {
        "alertname": NAME,
        "severity": "critical",
        "namespace": "",
        "team": "watchtower",
    }


def test_the_summary_says_for_how_long_and_the_description_why():
    (a,) = fire(WatchHealth(unhealthy_since=T0, detail="401 Unauthorized"), now=T0 + 5 * MINUTE)
    assert a.annotations["summary"] == "Watchtower has not had a healthy Kubernetes watch for 5m"
    assert "has failed for 5m: 401 Unauthorized." in a.annotations["description"]


def test_the_limit_is_the_configured_one():
    down = WatchHealth(unhealthy_since=T0, detail="")
    assert fire(down, now=T0 + 5 * MINUTE, unreachable_after=10 * MINUTE) == []
    assert len(fire(down, now=T0 + 10 * MINUTE, unreachable_after=10 * MINUTE)) == 1
