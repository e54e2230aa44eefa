"""Inhibition: a firing critical alert mutes the warning of the same workload, and nothing else; work that can
never start mutes its own wait alerts."""

from __future__ import annotations

import pytest

from tests.unit.domain.alerts.builders import alert_labels, tracked
from watchtower.domain.alerts.inhibition import (
    InhibitRule,
    critical_inhibits_warning,
    default_inhibitions,
    inhibited,
)
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.model import AlertState

DEFAULT = (critical_inhibits_warning(),)


def warning(name="train", **kw):
    return alert_labels(name, alertname="WorkloadWaitWarning", severity="warning", **kw)


def critical(name="train", **kw):
    return alert_labels(name, alertname="WorkloadWaitCritical", severity="critical", **kw)


def test_a_firing_critical_mutes_the_warning_of_the_same_workload():
    warn, crit = tracked(warning()), tracked(critical())
    assert inhibited([warn, crit], DEFAULT) == {warn.fingerprint: crit.fingerprint}


def test_another_rules_warning_of_the_same_workload_is_muted_too():
    stall = tracked(alert_labels("train", alertname="WorkloadGangStalled", severity="warning"))
    crit = tracked(critical())
    assert inhibited([stall, crit], DEFAULT) == {stall.fingerprint: crit.fingerprint}


@pytest.mark.parametrize(
    "other",
    [
        {"name": "eval"},  # another workload of the namespace
        {"ns": "nlp"},  # the same name in another namespace
        {"kind": "VolcanoJob"},  # the same name, another kind
    ],
)
def test_a_critical_does_not_mute_the_warning_of_another_workload(other):
    crit = tracked(critical())
    warn = tracked(warning(**other))
    assert inhibited([warn, crit], DEFAULT) == {}


@pytest.mark.parametrize("state", [AlertState.PENDING, AlertState.RESOLVED])
def test_only_a_firing_critical_mutes(state):
    assert inhibited([tracked(warning()), tracked(critical(), state=state)], DEFAULT) == {}


def test_a_critical_is_never_muted_by_another_critical_of_the_workload():
    crit = tracked(critical())
    inversion = tracked(alert_labels("train", alertname="WorkloadPriorityInversion", severity="critical"))
    assert inhibited([crit, inversion], DEFAULT) == {}


def test_an_alert_matching_both_sides_of_a_rule_does_not_mute_itself():
    anything = InhibitRule(
        source=(Matcher.of("severity", "=~", ".+"),),
        target=(Matcher.of("severity", "=~", ".+"),),
        equal=("namespace", "kind", "workload"),
    )
    assert inhibited([tracked(warning())], (anything,)) == {}


def test_a_configured_rule_can_mute_by_other_labels():
    per_team = InhibitRule(
        source=(Matcher.of("alertname", "=", "WorkloadWaitCritical"),),
        target=(Matcher.of("alertname", "=", "WorkloadGangStalled"),),
        equal=("team",),
    )
    crit = tracked(critical("train"))
    same_team = tracked(alert_labels("eval", alertname="WorkloadGangStalled"))
    other_team = tracked(alert_labels("bert", alertname="WorkloadGangStalled", ns="nlp", team="nlp-team"))
    assert inhibited([crit, same_team, other_team], (per_team,)) == {same_team.fingerprint: crit.fingerprint}


def test_watchtowers_own_critical_alert_does_not_mute_its_unrelated_warnings():
    watch_down = tracked(
        {
            "alertname": "WatchtowerKubernetesUnreachable",
            "severity": "critical",
            "namespace": "",
            "team": "watchtower",
        }
    )
    gone = tracked(
        {
            "alertname": "WatchtowerReceiverGone",
            "severity": "warning",
            "namespace": "",
            "team": "watchtower",
            "integration": "team-a/webhook/0",
        }
    )
    assert inhibited([watch_down, gone], DEFAULT) == {}


# ---- work that can never start: one notification for one misconfigured workload -----------------------

DEFAULTS = default_inhibitions()


def never(name="train", **kw):
    return alert_labels(name, alertname="WorkloadCanNeverStart", severity="warning", **kw)


@pytest.mark.parametrize(
    ("alertname", "severity"),
    [
        ("WorkloadWaitWarning", "warning"),
        ("WorkloadWaitCritical", "critical"),
        ("WorkloadQuotaBlocked", "warning"),
        ("WorkloadQuotaBlocked", "critical"),
    ],
)
def test_work_that_can_never_start_mutes_its_own_wait_alerts(alertname, severity):
    source = tracked(never())
    wait = tracked(alert_labels("train", alertname=alertname, severity=severity))
    assert inhibited([source, wait], DEFAULTS) == {wait.fingerprint: source.fingerprint}


def test_a_critical_wait_does_not_mute_the_never_alert_of_its_workload():
    # Else each would mute the other and on-call would be told of neither.
    source, warn, crit = tracked(never()), tracked(warning()), tracked(critical())
    muted = inhibited([source, warn, crit], DEFAULTS)
    assert source.fingerprint not in muted
    assert muted[crit.fingerprint] == source.fingerprint
    assert warn.fingerprint in muted


def test_the_never_alert_does_not_mute_another_workloads_wait_nor_its_other_alerts():
    source = tracked(never())
    other = tracked(warning("eval"))
    stall = tracked(alert_labels("train", alertname="WorkloadGangStalled", severity="warning"))
    assert inhibited([source, other, stall], DEFAULTS) == {}


@pytest.mark.parametrize("state", [AlertState.PENDING, AlertState.RESOLVED])
def test_waits_are_told_again_once_the_never_alert_stops_firing(state):
    assert inhibited([tracked(never(), state=state), tracked(warning())], DEFAULTS) == {}
