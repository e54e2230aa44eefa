"""ConfigMaps the Grafana sidecar (k8s-sidecar, as the Grafana Helm chart runs it) loads: dashboards labelled
`grafana_dashboard: "1"`, filed in a folder by the `grafana_folder` annotation (the chart's
`sidecar.dashboards.folderAnnotation`), and alert rule provisioning files labelled `grafana_alert: "1"`."""

from __future__ import annotations

from pathlib import Path

from watchtower.config.artefacts import ArtefactsConfig

from .objects import config_map

DASHBOARD_LABEL = {"grafana_dashboard": "1"}
ALERT_LABEL = {"grafana_alert": "1"}
FOLDER_ANNOTATION = "grafana_folder"


def dashboard_config_maps(dashboards: dict[Path, str], a: ArtefactsConfig) -> dict[str, dict[str, object]]:
    """Return {dashboard uid: ConfigMap} with one dashboard each, so one stays far below the size limit of an
    object and of `kubectl apply`'s last-applied annotation (256 KiB)."""
    out = {}
    for path, text in sorted(dashboards.items()):
        uid = path.name.removesuffix(".json")
        out[uid] = config_map(
            f"{uid}-dashboard",
            {path.name: text},
            a,
            labels=DASHBOARD_LABEL,
            annotations={FOLDER_ANNOTATION: a.grafana_folder},
        )
    return out


def alert_rules_config_map(files: dict[Path, str], a: ArtefactsConfig) -> dict[str, object]:
    """Return one ConfigMap holding Grafana's alerting provisioning files (`apiVersion: 1`, `groups:`)."""
    return config_map(
        "watchtower-grafana-alerts",
        {p.name: text for p, text in sorted(files.items())},
        a,
        labels=ALERT_LABEL,
    )
