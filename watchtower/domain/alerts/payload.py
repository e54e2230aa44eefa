"""The notification bodies: Alertmanager's webhook version "4" payload, and a Slack-compatible one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from .. import timefmt
from ..fairness.mail import is_report
from ..fairness.recipients import one_line
from .gotext import ZERO_TIME, quote_meta, rfc3339nano
from .model import AlertState, TrackedAlert, fingerprint
from .rules.base import workload_path


@lru_cache(maxsize=4096)
def rfc3339(t: float | None) -> str:
    """Return `t` as Alertmanager's API v2 writes times (strfmt.DateTime: milliseconds), its zero time for
    none. Its webhook body writes Go's shortest form instead (`gotext.rfc3339nano`)."""
    # Cached: the alerts of a storm share a handful of start times, and formatting one costs microseconds.
    return ZERO_TIME if t is None else timefmt.rfc3339(t, "milliseconds")


def _common(maps: list[Mapping[str, str]]) -> dict[str, str]:
    if not maps:
        return {}
    out = dict(maps[0])
    for m in maps[1:]:
        if not out:
            break
        for k in [k for k, v in out.items() if m.get(k) != v]:
            del out[k]
    return out


def _sorted(m: Mapping[str, str]) -> dict[str, str]:
    # Go writes a map's keys sorted: the body is built in the order it is written.
    return {k: m[k] for k in sorted(m)}


def generator_url(labels: Mapping[str, str], external_url: str) -> str:
    """Return the page an alert links to: its workload's page, else the status page."""
    base = external_url.rstrip("/")
    if not base:
        return ""
    ns, name = labels.get("namespace", ""), labels.get("workload", "")
    # The GPU-idle alert carries the kind as `workload_kind`; without it a Job and a JobSet of one name
    # would share one link.
    kind = labels.get("kind") or labels.get("workload_kind", "")
    return base + workload_path(ns, name, kind) if ns and name else base + "/"


def _name_key(name: str) -> tuple[int, ...]:
    # Descending order of names (the sentinel puts a name before the longer names it begins).
    return (*(-ord(c) for c in name), 1)


def _order_key(labels: Mapping[str, str]) -> tuple[Any, ...]:
    # alert.AlertSlice.Less: `job`, then `instance` (present before absent), then LabelSet.Before:
    # fewer labels first, then at the first differing (name, value) pair of the sorted sets the set
    # whose name sorts later, or whose value sorts first, goes first.
    over = tuple((0, labels[k]) if k in labels else (1, "") for k in ("job", "instance"))
    return (*over, len(labels), tuple((_name_key(k), labels[k]) for k in sorted(labels)))


def alertmanager_order(alerts: Iterable[TrackedAlert]) -> list[TrackedAlert]:
    """Return the alerts in the order Alertmanager's flush sorts them (stable)."""
    return sorted(alerts, key=lambda a: _order_key(a.labels))


def alert_dict(a: TrackedAlert, *, external_url: str = "") -> dict[str, Any]:
    resolved = a.state is AlertState.RESOLVED
    return {
        "status": "resolved" if resolved else "firing",
        "labels": _sorted(a.labels),
        "annotations": _sorted(a.annotations),
        "startsAt": rfc3339nano(a.fired_at if a.fired_at is not None else a.active_at),
        "endsAt": rfc3339nano(a.resolved_at) if resolved else ZERO_TIME,
        "generatorURL": generator_url(a.labels, external_url),
        # Alertmanager's fingerprint of the labels sent, the cluster label included: an alert pushed to it
        # and the same alert in this body are one alert.
        "fingerprint": a.fingerprint if a.unkeyed is None else fingerprint(a.labels),
    }


def webhook_payload(
    *,
    receiver: str,
    group_key: str,
    group_labels: Mapping[str, str],
    alerts: Iterable[TrackedAlert],
    external_url: str,
    reason: str = "",
    route_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Return the body Alertmanager's webhook notifier posts (version "4"), key for key in the order it
    writes them: notify/webhook.Message embedding template.Data.

    `group_key` is Alertmanager's (`Route.alertmanager_group_key`); `reason` the dedup stage's notification
    reason ("first notification", ...). The alerts come in Alertmanager's order, not firing first."""
    ordered = alertmanager_order(alerts)
    firing = any(a.state is not AlertState.RESOLVED for a in ordered)
    return {
        "receiver": quote_meta(receiver),
        "status": "firing" if firing else "resolved",
        "alerts": [alert_dict(a, external_url=external_url) for a in ordered],
        "notification_reason": reason,
        "groupLabels": _sorted(group_labels),
        "commonLabels": _sorted(_common([a.labels for a in ordered])),
        "commonAnnotations": _sorted(_common([a.annotations for a in ordered])),
        "routeLabels": _sorted(route_labels or {}),
        "externalURL": external_url,
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
    }


def counts(payload: Mapping[str, Any]) -> tuple[int, int]:
    """Return (firing, resolved) alert counts of a payload."""
    alerts = payload.get("alerts", [])
    f = sum(1 for a in alerts if a.get("status") == "firing")
    return f, len(alerts) - f


def cluster_of(payload: Mapping[str, Any], label: str | None) -> str:
    """Return the cluster all the payload's alerts carry as `label`, on one line; "" when they do not."""
    if not label:
        return ""
    return one_line(str(payload.get("commonLabels", {}).get(label, "")))


def title(payload: Mapping[str, Any], *, cluster_label: str | None = None) -> str:
    """Return the one-line title: `[FIRING:n] <rule> <namespace>` (or RESOLVED), as an email subject; a
    weekly report's subject for a report in the outbox. With `cluster_label`, ` (<cluster>)` follows when the
    alerts carry it."""
    if is_report(payload):
        return " ".join(str(payload.get("subject", "")).split())
    f, r = counts(payload)
    common = payload.get("commonLabels", {})
    groups = payload.get("groupLabels", {})
    rule = common.get("alertname") or groups.get("alertname") or "alerts"
    ns = common.get("namespace") or groups.get("namespace") or ""
    head = f"[FIRING:{f}]" if f else f"[RESOLVED:{r}]"
    text = f"{head} {rule} {ns}".strip()
    cluster = cluster_of(payload, cluster_label)
    if cluster:
        text = f"{text} ({cluster})"
    # A title is one line whatever the labels hold.
    return " ".join(text.split())


def slack_payload(
    payload: Mapping[str, Any], *, max_alerts: int = 20, cluster_label: str | None = None
) -> dict[str, Any]:
    """Return a Slack-compatible body (text + attachments) for the same notification."""
    lines = []
    alerts = payload.get("alerts", [])
    for a in alerts[:max_alerts]:
        ann = a.get("annotations", {})
        mark = "🔥" if a.get("status") == "firing" else "✅"
        lines.append(f"{mark} {ann.get('summary') or a.get('labels', {}).get('alertname', '')}")
    if len(alerts) > max_alerts:
        lines.append(f"… and {len(alerts) - max_alerts} more")
    color = "danger" if payload.get("status") == "firing" else "good"
    return {
        "text": title(payload, cluster_label=cluster_label),
        "attachments": [
            {
                "color": color,
                "text": "\n".join(lines),
                "fallback": title(payload, cluster_label=cluster_label),
            }
        ],
    }
