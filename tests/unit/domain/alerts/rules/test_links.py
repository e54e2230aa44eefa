"""The links every alert carries: its runbook section, and the status page and dashboard when configured."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import HOUR, MINUTE, T0, rule_input, settings, snapshot, workload
from watchtower.domain.alerts.rules import WatchHealth, self_health, tiered_wait


def wait_alert(**changes):
    inp = rule_input(snapshot(workload("train", wait=20 * MINUTE)), rule_settings=settings(**changes))
    (a,) = tiered_wait.evaluate(inp)
    return a.annotations


def test_without_urls_configured_an_alert_links_its_runbook_section_only():
    ann = wait_alert()
    assert ann["runbook_url"] == "docs/runbooks.md#workloadwaitwarning"
    assert "status_url" not in ann and "dashboard_url" not in ann


def test_a_workload_alert_links_the_page_and_dashboard_of_that_workload():
    ann = wait_alert(
        runbook_url="https://wiki.example/runbooks",
        status_url="https://watchtower.example/",
        dashboard_url="https://grafana.example/d/queue?orgId=1",
    )
    assert ann["runbook_url"] == "https://wiki.example/runbooks#workloadwaitwarning"
    assert ann["status_url"] == "https://watchtower.example/workloads/vision/train?kind=PaddleJob"
    assert (
        ann["dashboard_url"]
        == "https://grafana.example/d/queue?orgId=1&var-namespace=vision&var-workload=train"
    )


def test_an_alert_about_no_workload_links_the_pages_themselves():
    inp = rule_input(
        snapshot(),
        now=T0 + HOUR,
        health=WatchHealth(unhealthy_since=T0, detail=""),
        rule_settings=settings(
            status_url="https://watchtower.example", dashboard_url="https://grafana.example/d/q"
        ),
    )
    (a,) = self_health.evaluate(inp)
    assert a.annotations["status_url"] == "https://watchtower.example/"
    assert a.annotations["dashboard_url"] == "https://grafana.example/d/q"


def test_a_workload_link_quotes_every_part_of_the_path():
    inp = rule_input(
        snapshot(workload('a"b <c>', wait=20 * MINUTE)),
        rule_settings=settings(status_url="https://watchtower.example"),
    )
    (a,) = tiered_wait.evaluate(inp)
    assert a.annotations["status_url"] == (
        "https://watchtower.example/workloads/vision/a%22b%20%3Cc%3E?kind=PaddleJob"
    )


def test_the_default_settings_link_the_services_own_runbooks_and_a_setting_replaces_them():
    from watchtower.config.model import ServerConfig, Settings

    own = Settings().model_copy(update={"server": ServerConfig(external_url="http://wt.example:9000/")})
    assert own.rule_settings().runbook_url == "http://wt.example:9000/runbooks"
    wiki = Settings().model_copy(update={"server": ServerConfig(runbook_url="https://wiki.example/rb")})
    assert wiki.rule_settings().runbook_url == "https://wiki.example/rb"
