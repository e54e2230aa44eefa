"""The Prometheus rules, their promtool tests, the Alertmanager configuration and the Grafana-managed alert
rules, rendered from one configuration. `watchtower generate` writes them (watchtower/commands/generate.py)."""

from __future__ import annotations

from pathlib import Path

from watchtower.config import Settings
from watchtower.domain.promql.fleet import keep_label

from .alerting import alerting_group
from .alertmanager import alertmanager_config
from .fleet_tests import fleet_unit_tests
from .grafana import DATASOURCE_UID, provisioning
from .params import params_from
from .recording import fairness_group, fairness_usage_group, gpu_group, queue_group
from .render import to_yaml
from .unit_tests import unit_tests

HERE = Path(__file__).parent
RULES = Path("generated/watchtower-rules.yaml")
ALERTMANAGER = Path("generated/alertmanager.yaml")
GRAFANA_RULES = Path("generated/grafana-alert-rules.yaml")
TESTS = Path("tests/watchtower-rules.test.yaml")
COMMAND = "watchtower generate"


def render_all(
    settings: Settings, *, source: str = "", grafana_datasource_uid: str = DATASOURCE_UID
) -> dict[Path, str]:
    """Return {path relative to alerts/: text} for every generated file; raise ValueError (or
    SecretInlineError) for a configuration the artefacts cannot follow."""
    p = params_from(settings)
    rules = {
        "groups": [
            queue_group(p),
            gpu_group(p),
            fairness_group(p),
            fairness_usage_group(p),
            alerting_group(p),
        ]
    }
    if p.keep:  # fleet mode: every aggregation and join keeps the cluster label
        for group in rules["groups"]:
            for rule in group["rules"]:  # type: ignore[attr-defined]
                rule["expr"] = keep_label(rule["expr"], *p.keep)
                if "summary" in rule.get("annotations", {}):
                    rule["annotations"]["summary"] = p.summary(rule["annotations"]["summary"])
    rule_file = Path("..") / RULES  # promtool resolves rule_files from the test file's directory
    tests = unit_tests(p, str(rule_file))
    if p.keep:
        tests = fleet_unit_tests(tests, p)
    return {
        RULES: to_yaml(rules, command=COMMAND, source=source),
        ALERTMANAGER: to_yaml(alertmanager_config(settings), command=COMMAND, source=source),
        TESTS: to_yaml(tests, command=COMMAND, source=source),
        GRAFANA_RULES: to_yaml(
            provisioning(p, datasource_uid=grafana_datasource_uid), command=COMMAND, source=source
        ),
    }
