"""What `watchtower generate` needs beyond the tier policy: how Prometheus names Watchtower's own series, and
where the Kubernetes-native forms (PrometheusRule, ServiceMonitor, ConfigMaps, AlertmanagerConfig) live."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator

# A Kubernetes object name (DNS-1123 subdomain) and a namespace (DNS-1123 label).
_NAME = r"^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$"
_LABEL = r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$"


class ArtefactsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    job_selector: str = 'job="watchtower"'
    """Selector (without braces) of Watchtower's own series in the generated rules; the generated ServiceMonitor gives the series it scrapes exactly these labels."""
    namespace: str = Field("watchtower", pattern=_LABEL)
    """Namespace of the generated Kubernetes objects (`deploy/monitoring/`): the one `deploy/base` creates (and the Helm release's)."""
    service: str = Field("watchtower", pattern=_LABEL)
    """Name of the Service in front of Watchtower; Prometheus names the scrape job after it."""
    service_labels: dict[str, str] = {"app.kubernetes.io/name": "watchtower"}
    """Labels of that Service, which the ServiceMonitor selects it by."""
    metrics_port: str = Field("http", pattern=_LABEL)
    """Name of the Service port serving `/metrics`."""
    labels: dict[str, str] = {}
    """Extra labels on the PrometheusRule and the ServiceMonitor, for the Prometheus object's `ruleSelector` and `serviceMonitorSelector` (kube-prometheus-stack: `release: <its release>`)."""
    grafana_folder: str = Field("Watchtower", min_length=1)
    """Grafana folder of the dashboard ConfigMaps (annotation `grafana_folder`, read by the Grafana sidecar)."""
    alertmanager_secret: str = Field("watchtower-alertmanager", pattern=_NAME)
    """Secret (in `namespace`) the AlertmanagerConfig reads webhook URLs, SMTP passwords and CA certificates from."""
    fleet: bool = False
    """Fleet mode (or `watchtower generate --fleet`): the rules, dashboards and Grafana alert rules keep `cluster.label` in every aggregation and join, for a metrics engine over many clusters; the dashboards get a cluster variable. Off: the single-cluster files."""

    @field_validator("job_selector")
    @classmethod
    def _no_braces(cls, v: str) -> str:
        if any(c in v for c in "{}"):
            raise ValueError(f"a selector is the text inside braces, without them: {v!r}")
        return v
