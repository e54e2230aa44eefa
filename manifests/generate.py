"""Write the Kubernetes-native forms of the artefacts into `deploy/monitoring/`, one object a file.

    python -m manifests.generate [--config FILE] [--out DIR] [--check]

The PrometheusRule holds the generated rules file's groups, the dashboard ConfigMaps the generated dashboards,
the AlertmanagerConfig the generated Alertmanager route tree: one configuration drives both forms. --check
writes nothing and exits 1 when a file differs from what would be written (the no-drift check of CI).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import yaml

from alerts import generate as alerts_generate
from alerts.alertmanager import inhibit_rules, route_tree
from alerts.params import params_from
from alerts.render import to_yaml
from dashboards import generate as dashboards_generate
from watchtower.config import ConfigError, Settings, load_settings

from . import grafana, operator

ROOT = Path(__file__).resolve().parents[1]
HERE = ROOT / "deploy" / "monitoring"
COMMAND = "python -m manifests.generate"
PROMETHEUS_RULE = Path("prometheusrule.yaml")
SERVICE_MONITOR = Path("servicemonitor.yaml")
ALERTMANAGER_CONFIG = Path("alertmanagerconfig.yaml")
GRAFANA_ALERTS = Path("grafana-alerts.yaml")


def dashboard_file(uid: str) -> Path:
    return Path(f"grafana-dashboard-{uid.removeprefix('watchtower-')}.yaml")


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
    settings: Settings, *, source: str = "", grafana_alerts: dict[Path, str] | None = None
) -> dict[Path, str]:
    """Return {file name under deploy/monitoring: text}; `grafana_alerts` are Grafana's alert provisioning
    files, put into a ConfigMap when given."""
    a = settings.artefacts
    rules_text = alerts_generate.render_all(settings, source=source)[alerts_generate.RULES]
    groups = yaml.safe_load(rules_text)["groups"]
    p = params_from(settings)
    am, keys = operator.alertmanager_config(settings, route_tree(settings), inhibit_rules(settings))

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
    if grafana_alerts:
        out[GRAFANA_ALERTS] = dump(grafana.alert_rules_config_map(dict(grafana_alerts), a))
    return out


def _insert_after_header(text: str, note: str) -> str:
    head, _, body = text.partition("\n# configuration and regenerate.\n")
    return f"{head}\n# configuration and regenerate.\n{note}{body}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog=COMMAND, description=(__doc__ or "").split("\n")[0])
    ap.add_argument("--config", help="Watchtower configuration file (default: the built-in defaults)")
    ap.add_argument("--out", type=Path, default=HERE, help="output directory (default: deploy/monitoring/)")
    ap.add_argument("--check", action="store_true", help="write nothing; exit 1 if a file would change")
    args = ap.parse_args(argv)
    try:
        files = render_all(load_settings(args.config), source=args.config or "")
    except (ConfigError, ValueError) as e:
        print(f"manifests.generate: {e}", file=sys.stderr)
        return 2
    if args.check:
        stale = alerts_generate.drifted(files, args.out)
        for path in stale:
            print(f"out of date: {path} (run {COMMAND})", file=sys.stderr)
        return 1 if stale else 0
    for path in alerts_generate.write_all(files, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
