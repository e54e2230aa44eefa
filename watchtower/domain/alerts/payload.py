"""The notification bodies: Alertmanager's webhook version "4" payload, and a Slack-compatible one."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

from .. import timefmt
from .model import AlertState, TrackedAlert

ZERO_TIME = "0001-01-01T00:00:00Z"


@lru_cache(maxsize=4096)
def rfc3339(t: float | None) -> str:
    """Return `t` as Alertmanager writes times: milliseconds, and its zero time for none."""
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


def alert_dict(a: TrackedAlert, *, generator_url: str = "") -> dict[str, Any]:
    resolved = a.state is AlertState.RESOLVED
    return {
        "status": "resolved" if resolved else "firing",
        "labels": dict(a.labels),
        "annotations": dict(a.annotations),
        "startsAt": rfc3339(a.fired_at if a.fired_at is not None else a.active_at),
        "endsAt": rfc3339(a.resolved_at) if resolved else ZERO_TIME,
        "generatorURL": generator_url,
        "fingerprint": a.fingerprint,
    }


def webhook_payload(
    *,
    receiver: str,
    group_key: str,
    group_labels: Mapping[str, str],
    alerts: Iterable[TrackedAlert],
    external_url: str,
    generator_url: str = "",
) -> dict[str, Any]:
    """Return the body Alertmanager posts (version "4"): firing alerts first, then resolved, each by start."""
    ordered = sorted(
        alerts,
        key=lambda a: (a.state is AlertState.RESOLVED, a.fired_at or a.active_at, a.fingerprint),
    )
    firing = any(a.state is not AlertState.RESOLVED for a in ordered)
    return {
        "version": "4",
        "groupKey": group_key,
        "truncatedAlerts": 0,
        "status": "firing" if firing else "resolved",
        "receiver": receiver,
        "groupLabels": dict(group_labels),
        "commonLabels": _common([a.labels for a in ordered]),
        "commonAnnotations": _common([a.annotations for a in ordered]),
        "externalURL": external_url,
        "alerts": [alert_dict(a, generator_url=generator_url) for a in ordered],
    }


def counts(payload: Mapping[str, Any]) -> tuple[int, int]:
    """Return (firing, resolved) alert counts of a payload."""
    alerts = payload.get("alerts", [])
    f = sum(1 for a in alerts if a.get("status") == "firing")
    return f, len(alerts) - f


def title(payload: Mapping[str, Any]) -> str:
    """Return the one-line title: `[FIRING:n] <rule> <namespace>` (or RESOLVED), as an email subject."""
    f, r = counts(payload)
    common = payload.get("commonLabels", {})
    groups = payload.get("groupLabels", {})
    rule = common.get("alertname") or groups.get("alertname") or "alerts"
    ns = common.get("namespace") or groups.get("namespace") or ""
    head = f"[FIRING:{f}]" if f else f"[RESOLVED:{r}]"
    text = f"{head} {rule} {ns}".strip()
    # A title is one line whatever the labels hold.
    return " ".join(text.split())


def slack_payload(payload: Mapping[str, Any], *, max_alerts: int = 20) -> dict[str, Any]:
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
        "text": title(payload),
        "attachments": [{"color": color, "text": "\n".join(lines), "fallback": title(payload)}],
    }
