"""The Kubernetes files `watchtower generate` writes under `deploy/` (watchtower/commands/generate.py): the
Kubernetes-native forms of the artefacts, one object a file under `deploy/monitoring/`, and the RBAC of
`deploy/base/` and the chart, whose read rules follow the watched kinds (rbac.py).

The PrometheusRule holds the generated rules file's groups, the dashboard ConfigMaps the generated dashboards,
the Grafana alert ConfigMap the generated provisioning file, the AlertmanagerConfig the generated route tree:
one configuration drives both forms.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from alerts import generate as alerts_generate
from alerts.alertmanager import inhibit_rules, receivers, route_tree
from alerts.grafana import DATASOURCE_UID
from alerts.params import params_from
from alerts.render import to_yaml
from dashboards import generate as dashboards_generate
from watchtower.config import Settings

from . import grafana, operator, rbac

COMMAND = alerts_generate.COMMAND
# Paths under deploy/.
MONITORING = Path("monitoring")
PROMETHEUS_RULE = MONITORING / "prometheusrule.yaml"
SERVICE_MONITOR = MONITORING / "servicemonitor.yaml"
ALERTMANAGER_CONFIG = MONITORING / "alertmanagerconfig.yaml"
GRAFANA_ALERTS = MONITORING / "grafana-alerts.yaml"


def dashboard_file(uid: str) -> Path:
    return MONITORING / f"grafana-dashboard-{uid.removeprefix('watchtower-')}.yaml"


def _secret_note(settings: Settings, keys: list[tuple[str, str]]) -> str:
    a = settings.artefacts
    if not keys:
        return "# The receivers reference no secret.\n"
    lines = [
        f"# The receivers read their secrets from the Secret {a.alertmanager_secret!r} in {a.namespace!r}, keys:\n",
        *(f"#   {key}: {holds}\n" for key, holds in keys),
        f"# e.g. kubectl -n {a.namespace} create secret generic {a.alertmanager_secret} "
        + " ".join(f"--from-file={key}=..." for key, _ in keys)
        + "\n",
    ]
    return "".join(lines)


# prometheus-operator confines an AlertmanagerConfig to alerts labelled with its own namespace unless told
# otherwise; Watchtower's alerts carry the workloads' namespaces (or none), so say how to take all of them.
_SCOPE_NOTE = (
    "# prometheus-operator routes through an AlertmanagerConfig only the alerts whose `namespace` label is the\n"
    "# object's namespace (alertmanagerConfigMatcherStrategy OnNamespace, the default). Watchtower's alerts carry\n"
    "# the workloads' namespaces or none: create this object in the Alertmanager's namespace with the strategy\n"
    "# OnNamespaceExceptForAlertmanagerNamespace (or None), or name it in the Alertmanager's\n"
    "# spec.alertmanagerConfiguration.\n"
)


def render_all(
    settings: Settings, *, source: str = "", grafana_datasource_uid: str = DATASOURCE_UID
) -> dict[Path, str]:
    """Return {path under deploy/: text}; raise ValueError for a job selector a ServiceMonitor cannot give
    its series."""
    a = settings.artefacts
    plain = alerts_generate.render_all(settings, source=source, grafana_datasource_uid=grafana_datasource_uid)
    groups = yaml.safe_load(plain[alerts_generate.RULES])["groups"]
    p = params_from(settings)
    am, keys = operator.alertmanager_config(
        settings, route_tree(settings), inhibit_rules(settings), receivers(settings)
    )

    def dump(doc: object) -> str:
        return to_yaml(doc, command=COMMAND, source=source)

    out = {
        PROMETHEUS_RULE: dump(operator.prometheus_rule(groups, a)),
        SERVICE_MONITOR: dump(operator.service_monitor(a, scrape_interval=p.scrape_interval)),
        ALERTMANAGER_CONFIG: _insert_after_header(dump(am), _SCOPE_NOTE + _secret_note(settings, keys)),
    }
    boards = {Path(rel.name): text for rel, text in dashboards_generate.render_all(settings).items()}
    for uid, cm in grafana.dashboard_config_maps(boards, a).items():
        out[dashboard_file(uid)] = dump(cm)
    grafana_rules = {Path(alerts_generate.GRAFANA_RULES.name): plain[alerts_generate.GRAFANA_RULES]}
    out[GRAFANA_ALERTS] = dump(grafana.alert_rules_config_map(grafana_rules, a))
    out.update(rbac.render_all())
    return out


def _insert_after_header(text: str, note: str) -> str:
    head, _, body = text.partition("\n# configuration and regenerate.\n")
    return f"{head}\n# configuration and regenerate.\n{note}{body}"
