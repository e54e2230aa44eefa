"""prometheus-operator's forms of the rules, the scrape and the route tree: PrometheusRule, ServiceMonitor and
AlertmanagerConfig (monitoring.coreos.com), built from what the plain files are built from.

Facts from prometheus-operator (pkg/prometheus/promcfg.go, pkg/alertmanager/amcfg.go, v0.93-v0.95):
- a ServiceMonitor's targets get `job` = the Service's name (or the value of the Service label named by
  `jobLabel`), `namespace`, `service`, `pod`, `container`, `endpoint`; the endpoint's `relabelings` run after;
- an AlertmanagerConfig is read as a route under the root with `namespace="<its namespace>"` added to its
  matchers and inhibitions (strategy OnNamespace, the default), unless it lives in the Alertmanager's own
  namespace under OnNamespaceExceptForAlertmanagerNamespace, or is named by `alertmanagerConfiguration`;
- secrets come from Secrets in the AlertmanagerConfig's namespace, never from files.
"""

from __future__ import annotations

from typing import Any

from watchtower.config import Settings
from watchtower.config.alerting import EmailConfig, ReceiverConfig
from watchtower.config.artefacts import ArtefactsConfig
from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.promql.syntax import duration

from .objects import fixed_labels, metadata

GROUP = "monitoring.coreos.com"
METRICS_PATH = "/metrics"
# The series of Watchtower that carry the workload's namespace (pending workloads, quotas) would lose it to
# `exported_namespace` under the target's own `namespace` label without honorLabels.
HONOR_LABELS = True
# Target labels the operator sets itself; `job` and `service` follow from the Service's name.
_OPERATOR_SET = ("namespace", "pod", "container", "endpoint", "node")


def prometheus_rule(groups: list[dict[str, Any]], a: ArtefactsConfig) -> dict[str, object]:
    """Return a PrometheusRule holding `groups` as they are (the generated rules file's groups)."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "PrometheusRule",
        "metadata": metadata("watchtower-rules", a, labels=a.labels),
        "spec": {"groups": groups},
    }


def scrape_relabelings(a: ArtefactsConfig) -> list[dict[str, str]]:
    """Return the endpoint relabelings that give every scraped series the labels of `artefacts.job_selector`;
    raise ValueError for a selector a ServiceMonitor cannot satisfy."""
    out = []
    for name, value in fixed_labels(a.job_selector).items():
        if name == "job" and value == a.service:
            continue  # the operator's own job label
        if name == "service":
            if value != a.service:
                raise ValueError(
                    f'artefacts.job_selector selects service="{value}" but artefacts.service is {a.service!r}'
                )
            continue
        if name in _OPERATOR_SET:
            raise ValueError(
                f"artefacts.job_selector: {name!r} is set by prometheus-operator from where the target runs "
                "(and Watchtower's own series carry the workloads' namespace): select by job instead"
            )
        out.append({"targetLabel": name, "replacement": value, "action": "replace"})
    return out


def service_monitor(a: ArtefactsConfig, *, scrape_interval: float) -> dict[str, object]:
    """Return a ServiceMonitor scraping Watchtower's Service every `scrape_interval` (the interval the rules'
    windows are sized for)."""
    endpoint: dict[str, object] = {
        "port": a.metrics_port,
        "path": METRICS_PATH,
        "interval": duration(scrape_interval),
        "honorLabels": HONOR_LABELS,
    }
    relabelings = scrape_relabelings(a)
    if relabelings:
        endpoint["relabelings"] = relabelings
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ServiceMonitor",
        "metadata": metadata(a.service, a, labels=a.labels),
        "spec": {"selector": {"matchLabels": dict(a.service_labels)}, "endpoints": [endpoint]},
    }


def _matcher(text: str) -> dict[str, str]:
    m = Matcher.parse(text)
    return {"name": m.name, "matchType": m.op.value, "value": m.value}


_ROUTE_KEYS = {
    "receiver": "receiver",
    "group_by": "groupBy",
    "group_wait": "groupWait",
    "group_interval": "groupInterval",
    "repeat_interval": "repeatInterval",
    "continue": "continue",
}


def _route(plain: dict[str, Any]) -> dict[str, object]:
    out: dict[str, object] = {}
    for key, value in plain.items():
        if key == "matchers":
            out["matchers"] = [_matcher(t) for t in value]
        elif key == "routes":
            out["routes"] = [_route(c) for c in value]
        else:
            out[_ROUTE_KEYS[key]] = value
    return out


def secret_key(receiver: str, integration: str, index: int, what: str) -> str:
    """Return the key of the Secret entry one integration reads (`oncall-webhook-0-url`)."""
    return f"{receiver}-{integration}-{index}-{what}"


class _Secrets:
    """Collects the Secret entries the receivers reference, so the file can say which ones to create."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.keys: list[tuple[str, str]] = []

    def ref(self, key: str, holds: str) -> dict[str, str]:
        self.keys.append((key, holds))
        return {"name": self.name, "key": key}


def _email(r: str, j: int, e: EmailConfig, secrets: _Secrets) -> dict[str, object]:
    out: dict[str, object] = {
        "to": ", ".join(e.to),
        "from": e.from_,
        "smarthost": f"{e.smarthost}:{e.port}",
        "sendResolved": e.send_resolved,
        # As in the plain file: implicit TLS on 465 is Alertmanager's own; "none" must not ask for STARTTLS.
        "requireTLS": e.security != "none",
    }
    if e.username:
        out["authUsername"] = e.username
        out["authPassword"] = secrets.ref(
            secret_key(r, "email", j, "password"), f"SMTP password of {e.username}"
        )
    tls: dict[str, object] = {}
    if e.ca_file:
        tls["ca"] = {"secret": secrets.ref(secret_key(r, "email", j, "ca"), "CA certificate (PEM)")}
    if not e.verify:
        tls["insecureSkipVerify"] = True
    if tls:
        out["tlsConfig"] = tls
    return out


def _receiver(r: ReceiverConfig, secrets: _Secrets) -> dict[str, object]:
    out: dict[str, object] = {"name": r.name}
    if r.email:
        out["emailConfigs"] = [_email(r.name, j, e, secrets) for j, e in enumerate(r.email)]
    if r.webhooks:
        # Alertmanager cannot sign with Standard Webhooks: the signing secret stays with Watchtower's delivery.
        out["webhookConfigs"] = [
            {
                "urlSecret": secrets.ref(secret_key(r.name, "webhook", j, "url"), "webhook URL"),
                "sendResolved": w.send_resolved,
            }
            for j, w in enumerate(r.webhooks)
        ]
    return out


def alertmanager_config(
    settings: Settings,
    route: dict[str, Any],
    inhibit: list[dict[str, Any]],
    receivers: list[ReceiverConfig],
) -> tuple[dict[str, object], list[tuple[str, str]]]:
    """Return an AlertmanagerConfig of the plain file's `route`, `inhibit` rules and `receivers`, and the
    (key, what it holds) entries of the Secret it references."""
    a = settings.artefacts
    secrets = _Secrets(a.alertmanager_secret)
    spec = {
        "route": _route(route),
        "receivers": [_receiver(r, secrets) for r in receivers],
        "inhibitRules": [
            {
                "sourceMatch": [_matcher(t) for t in i["source_matchers"]],
                "targetMatch": [_matcher(t) for t in i["target_matchers"]],
                "equal": list(i["equal"]),
            }
            for i in inhibit
        ],
    }
    doc: dict[str, object] = {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": "AlertmanagerConfig",
        "metadata": metadata("watchtower", a),
        "spec": spec,
    }
    return doc, secrets.keys
