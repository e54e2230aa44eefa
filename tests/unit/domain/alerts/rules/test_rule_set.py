"""The rule set as the service runs it: every rule in order, `disabled` by rule or by alertname."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import HOUR, T0, names, rule_input, settings, snapshot, workload
from watchtower.domain.alerts.rules import ALERTNAMES, RULES, WatchHealth, evaluate_rules
from watchtower.domain.queue import WorkloadState


def everything_fires(**changes):
    """A queue where a wait (warning and critical), a gang stall and Watchtower's own alert all fire."""
    snap = snapshot(
        workload("train", tier="high", wait=2 * HOUR),
        workload(
            "stalled",
            tier="low",
            state=WorkloadState.PARTIAL,
            wait=HOUR,
            gpus_held=8,
            pods_running=1,
            pods_pending=1,
        ),
    )
    inp = rule_input(
        snap,
        health=WatchHealth(unhealthy_since=T0 - HOUR, detail=""),
        gone_receivers={"team-a/webhook/0": "410"},
        rule_settings=settings(**changes),
    )
    return names(evaluate_rules(inp))


def test_every_rule_runs_in_the_order_listed():
    assert everything_fires() == [
        ("WorkloadWaitWarning", "warning"),
        ("WorkloadWaitCritical", "critical"),
        ("WorkloadGangStalled", "warning"),
        ("WatchtowerKubernetesUnreachable", "critical"),
        ("WatchtowerReceiverGone", "warning"),
    ]


def test_disabling_a_rule_by_its_name_silences_all_its_alertnames():
    assert [n for n, _ in everything_fires(disabled=frozenset({"tiered_wait"}))] == [
        "WorkloadGangStalled",
        "WatchtowerKubernetesUnreachable",
        "WatchtowerReceiverGone",
    ]


def test_disabling_one_alertname_keeps_the_rest_of_its_rule():
    fired = [
        n for n, _ in everything_fires(disabled=frozenset({"WorkloadWaitWarning", "WatchtowerReceiverGone"}))
    ]
    assert fired == ["WorkloadWaitCritical", "WorkloadGangStalled", "WatchtowerKubernetesUnreachable"]


def test_every_alertname_belongs_to_a_rule_that_runs():
    assert set(ALERTNAMES.values()) == set(RULES)
