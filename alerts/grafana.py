"""Grafana-managed alert rules, for teams that alert from Grafana: the twins of the Prometheus rules.

Built with grafanalib (`AlertGroup`, `AlertRulev9`, `AlertExpression`) from the same `RuleParams`, then
written in Grafana's alerting file-provisioning form (`apiVersion: 1`, `groups`), which is not the ruler-API
form grafanalib emits: its `grafana_alert` block is flattened into the rule, `no_data_state` and
`exec_err_state` become `noDataState` and `execErrState`, and grafanalib's "No Data" is Grafana's `NoData`.

Each rule's title is its Prometheus twin's alertname (Grafana names an alert by its rule's title), so one
Grafana rule covers all tiers: query A returns one series per tier (or namespace, or instance) and the
condition, a math expression, compares it per series. Where thresholds differ per tier, query T returns them
as one series per tier and the condition is `$A >= $T` (Grafana joins the two sets on their labels). The
boundary test in tests/artefacts/test_grafana_rules.py holds each rule to its twin on the real Prometheus.

Grafana interpolates environment variables in provisioning files, but not in query models or annotations:
the PromQL and the `{{ $labels.x }}` templates are safe; labels carry no `$`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

from grafanalib import core as g

from watchtower.domain.alerts.rules.base import human
from watchtower.domain.promql.fleet import keep_label
from watchtower.domain.promql.syntax import duration, quoted

from . import alerting
from .params import RuleParams

FOLDER = "Watchtower"
GROUP = "watchtower"
# The Prometheus data source's UID in Grafana. Provision the data source with this UID, or pass another to
# `watchtower generate --grafana-datasource-uid`.
DATASOURCE_UID = "prometheus"
# Grafana's instant queries: the value now, as the Prometheus rules see it at each evaluation.
LOOKBACK = 600
# Grafana's server-side expressions data source.
EXPR = {"type": "__expr__", "uid": "__expr__"}
# Group evaluation interval: a multiple of Grafana's 10 s base interval, as often as Prometheus evaluates by
# default.
INTERVAL = 60.0

_NO_DATA = {g.ALERTRULE_STATE_DATA_OK: "OK", g.ALERTRULE_STATE_DATA_ALERTING: "Alerting"}
_ERR = {g.ALERTRULE_STATE_DATA_ERROR: "Error", g.ALERTRULE_STATE_DATA_ALERTING: "Alerting"}


@dataclass(frozen=True, slots=True)
class GrafanaRule:
    """One Grafana rule as the test and the generator both read it."""

    title: str
    value: str  # PromQL of query A
    condition: str  # math expression over $A (and $T)
    thresholds: str = ""  # PromQL of query T, "" when the condition holds a constant
    for_: float = 0.0
    labels: tuple[tuple[str, str], ...] = ()
    summary: str = ""
    description: str = ""
    no_data_alerts: bool = False  # an absent series is itself the alert (Watchtower down)


def _tier_vector(p: RuleParams, attr: str) -> str:
    """Return one series per tier whose value is the tier's `attr` (warn_after, critical_after)."""
    parts = [
        f'label_replace(vector({getattr(t, attr):g}), "tier", {quoted(t.name)}, "", "")'
        for t in p.tiers.tiers
    ]
    return " or ".join(parts)


def rules(p: RuleParams) -> list[GrafanaRule]:
    """Return the Grafana twins of the tiered waits, idle GPUs while work waits, thrash and Watchtower down."""
    own = p.own
    wait = own.oldest_wait("tier")
    out = []
    for name, mirrors, attr, severity in (
        (alerting.QUEUE_WAIT_WARNING, "WorkloadWaitWarning", "warn_after", "warning"),
        (alerting.QUEUE_WAIT_CRITICAL, "WorkloadWaitCritical", "critical_after", "critical"),
    ):
        out.append(
            GrafanaRule(
                title=name,
                value=wait,
                thresholds=_tier_vector(p, attr),
                condition="$A >= $T",  # >= as the twin and the service
                for_=p.for_of(name, mirrors),
                labels=(("severity", severity),),
                summary=f"Work in the {{{{ $labels.tier }}}} tier has waited "
                f"{{{{ $values.A.Value | humanizeDuration }}}}, over its {severity} threshold of "
                f"{{{{ $values.T.Value | humanizeDuration }}}}",
                description=f"The oldest waiting workload of tier {{{{ $labels.tier }}}} has waited "
                f"{{{{ $values.A.Value | humanizeDuration }}}} ({attr} of the tier). Watchtower's status page "
                "and its own alerts name the workloads and why they wait.",
            )
        )
    idle = " or ".join(
        f'label_replace({alerting.gpu_idle_expr(p, t)}, "tier", {quoted(t.name)}, "", "")'
        for t in p.tiers.tiers
    )
    out.append(
        GrafanaRule(
            title=alerting.GPU_IDLE,
            value=idle,
            condition="$A > 0",
            for_=p.for_of(alerting.GPU_IDLE, "GPUIdleWhileQueueWaits"),
            labels=(("severity", "warning"),),
            summary="{{ $values.A.Value }} GPU device(s) of namespace {{ $labels.namespace }} (team "
            "{{ $labels.team }}) idle for "
            + human(p.idle_window)
            + " while {{ $labels.tier }}-tier work waits",
            description="Pods of namespace {{ $labels.namespace }} hold {{ $values.A.Value }} GPU device(s) "
            f"whose utilisation stayed under {p.idle_threshold:g} % for {human(p.idle_window)}, while "
            "workloads of the {{ $labels.tier }} tier wait and those pods are not of a higher tier.",
        )
    )
    out.append(
        GrafanaRule(
            title=alerting.PREEMPTION_THRASH,
            value=own.most_preemptions("tier"),
            condition=f"$A >= {p.thrash_count}",
            for_=p.for_of(alerting.PREEMPTION_THRASH, "WorkloadPreemptionThrash"),
            labels=(("severity", "warning"),),
            summary="A workload of the {{ $labels.tier }} tier was preempted {{ $values.A.Value }} times in "
            + human(p.thrash_window),
            description="One workload of tier {{ $labels.tier }} was preempted {{ $values.A.Value }} times "
            f"within {human(p.thrash_window)} (alert at {p.thrash_count}). Watchtower's "
            "WorkloadPreemptionThrash alert and the Preemption churn dashboard name it and its preemptors.",
        )
    )
    out.append(
        GrafanaRule(
            title=alerting.DOWN,
            value=f"up{{{p.watchtower_selector}}}",
            condition="$A == 0",
            for_=p.down_for,
            labels=(("severity", "critical"),),
            summary="Watchtower's /metrics cannot be scraped",
            description="Prometheus has not scraped Watchtower ({{ $labels.job }} {{ $labels.instance }}) "
            f"for {human(p.down_for)}, or has no target for it: queue alerts may be missing.",
            no_data_alerts=True,
        )
    )
    return out


def _uid(title: str) -> str:
    # Grafana rule UIDs: at most 40 characters of [a-zA-Z0-9_-]; stable across runs, so re-provisioning
    # updates the rule in place.
    return "watchtower-" + hashlib.sha256(title.encode()).hexdigest()[:16]


def _instant(expr: str, ref: str) -> g.Target:
    return g.Target(expr=expr, refId=ref, instant=True, datasource=DATASOURCE_UID)


def alert_rule(p: RuleParams, r: GrafanaRule) -> g.AlertRulev9:
    """Return `r` as grafanalib's rule: instant queries A (and T), the math condition C."""
    # Fleet mode: query A keeps the cluster label; T (one series per tier) joins every cluster's A, as
    # Grafana's math expressions join series whose labels are a subset of the other's.
    triggers: list[g.Target | g.AlertExpression] = [_instant(keep_label(r.value, *p.keep), "A")]
    if r.thresholds:
        triggers.append(_instant(r.thresholds, "T"))
    triggers.append(g.AlertExpression(refId="C", expression=r.condition, expressionType=g.EXP_TYPE_MATH))
    return g.AlertRulev9(
        title=r.title,
        uid=_uid(r.title),
        triggers=triggers,
        condition="C",
        evaluateFor=duration(r.for_) if r.for_ else "0s",
        labels=dict(r.labels),
        annotations={
            "summary": p.summary(r.summary),
            "description": r.description,
            "runbook_url": p.runbook_url(r.title),
        },
        noDataAlertState=g.ALERTRULE_STATE_DATA_ALERTING if r.no_data_alerts else g.ALERTRULE_STATE_DATA_OK,
        errorAlertState=g.ALERTRULE_STATE_DATA_ERROR,
        timeRangeFrom=LOOKBACK,
    )


def _provisioned(rule: dict[str, Any], datasource_uid: str, keep_firing_for: float) -> dict[str, Any]:
    body = rule["grafana_alert"]
    data = []
    for q in body["data"]:
        m = q["model"]
        if q["datasourceUid"] == "-100":  # grafanalib's expression: what Grafana reads for its type
            model = {
                "refId": m["refId"],
                "type": m["type"],
                "expression": m["expression"],
                "datasource": dict(EXPR),
            }
            data.append({"refId": q["refId"], "datasourceUid": EXPR["uid"], "model": model})
        else:
            model = {"refId": m["refId"], "expr": m["expr"], "instant": True, "range": False}
            data.append(
                {
                    "refId": q["refId"],
                    "relativeTimeRange": q["relativeTimeRange"],
                    "datasourceUid": datasource_uid,
                    "model": model,
                }
            )
    out = {
        "uid": rule["uid"],
        "title": body["title"],
        "condition": body["condition"],
        "data": data,
        "noDataState": _NO_DATA[body["no_data_state"]],
        "execErrState": _ERR[body["exec_err_state"]],
        "for": rule["for"],
    }
    if keep_firing_for:
        out["keepFiringFor"] = duration(keep_firing_for)
    out["labels"] = rule["labels"]
    out["annotations"] = rule["annotations"]
    return out


def _keep_firing_for(p: RuleParams, rule: dict[str, Any]) -> float:
    # As in the Prometheus rules: only the alerts that flap on a one-evaluation dip keep firing.
    return p.keep_firing_for if rule["grafana_alert"]["title"] in alerting.KEEP_FIRING else 0.0


def provisioning(p: RuleParams, *, datasource_uid: str = DATASOURCE_UID) -> dict[str, Any]:
    """Return Grafana's alerting provisioning document (one folder, one group) for the rules of `p`."""
    group = g.AlertGroup(
        name=GROUP,
        folder=FOLDER,
        evaluateInterval=duration(INTERVAL),
        rules=[alert_rule(p, r) for r in rules(p)],
    )
    raw = group.to_json_data()
    doc: dict[str, Any] = g.AlertFileBasedProvisioning(groups=[raw]).to_json_data()
    doc["groups"] = [
        {
            "orgId": 1,
            "name": raw["name"],
            "folder": raw["folder"],
            "interval": raw["interval"],
            "rules": [_provisioned(r, datasource_uid, _keep_firing_for(p, r)) for r in raw["rules"]],
        }
    ]
    return doc
