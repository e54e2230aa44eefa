"""WatchtowerPrometheusUnreachable: GPU utilisation cannot be read; the Kubernetes-based alerts go on."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import T0, names, rule_input, snapshot
from watchtower.domain.alerts.rules import prometheus_unreachable
from watchtower.domain.gpu_usage import PrometheusHealth, unreachable_alert

NAME = "WatchtowerPrometheusUnreachable"
URL = "http://prometheus:9090"


def fire(health, *, failures=1):
    found = unreachable_alert(health, url=URL, failures=failures)
    return prometheus_unreachable.evaluate(rule_input(snapshot(), gpu_alerts=[found] if found else []))


def test_a_prometheus_that_answers_raises_nothing():
    assert fire(PrometheusHealth().succeeded(T0)) == []


def test_failed_reads_raise_one_warning_owned_by_watchtower():
    (a,) = fire(PrometheusHealth().failed(T0, "connection refused"))
    assert names([a]) == [(NAME, "warning")]
    assert dict(a.labels) == {"alertname": NAME, "severity": "warning", "namespace": "", "team": "watchtower"}
    assert a.annotations["runbook_url"] == "docs/runbooks.md#watchtowerprometheusunreachable"


def test_it_waits_for_the_configured_number_of_consecutive_failures():
    twice = PrometheusHealth().failed(T0, "timeout").failed(T0 + 30, "timeout")
    assert fire(twice, failures=3) == []
    (a,) = fire(twice.failed(T0 + 60, "timeout"), failures=3)
    assert a.annotations["summary"] == (
        f"Prometheus {URL} cannot be read (3 attempts): GPU utilisation figures are stale; "
        "Kubernetes-based alerts keep working"
    )
    assert a.annotations["error"] == "timeout"
