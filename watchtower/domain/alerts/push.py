"""Alerts pushed to an Alertmanager the way Prometheus pushes them (rules/alerting.go): which alerts are
due, and each as the API's postable alert.

A firing alert is sent when it fires and again every resend interval, valid until 4 × max(resend interval,
evaluation interval) after the send, so two missed sends do not resolve it; a resolved alert is sent with
its resolve time as `endsAt`, and again every resend interval for `resolved_for` (15 minutes), so an
Alertmanager that was down when it resolved still hears of it. Pending alerts are not sent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .gotext import rfc3339nano
from .model import AlertState, TrackedAlert
from .payload import generator_url

# The labels that name an alert in Alertmanager: what routes, groups, silences and inhibits it. Values that
# change while it fires (GPUs, priority class) go to annotations, so the alert keeps its identity. The
# workload's kind is part of it (`kind`; `workload_kind` on the GPU-idle alert): without it a Job and a
# JobSet of one name in one namespace would be one alert in Alertmanager.
PUSH_LABELS = ("alertname", "severity", "tier", "team", "namespace", "workload", "kind", "workload_kind")
# Kept by the sender: the seconds a firing alert stays valid after the moment it is actually sent.
VALID_FOR = "validFor"


@dataclass(frozen=True, slots=True)
class PushPolicy:
    resend_interval: float
    evaluation_interval: float
    resolved_for: float = 900.0

    @property
    def valid_for(self) -> float:
        """How long a firing alert stays valid after a send (Prometheus: 4 × max(interval, resend delay))."""
        return 4 * max(self.resend_interval, self.evaluation_interval)


def pushed_labels(
    labels: Mapping[str, str], cluster: str | None = None
) -> tuple[dict[str, str], dict[str, str]]:
    """Return (the labels Alertmanager gets, the other labels, which travel as annotations); `cluster` names
    the cluster label (an alert's `unkeyed` one), which Alertmanager gets too: it tells apart the same alert
    pushed by two clusters."""
    keep = {k: labels[k] for k in PUSH_LABELS if k in labels}
    if cluster is not None and cluster in labels:
        keep[cluster] = labels[cluster]
    rest = {k: v for k, v in labels.items() if k not in keep}
    return keep, rest


def due(
    alerts: Iterable[TrackedAlert], sent: Mapping[str, float], *, now: float, policy: PushPolicy
) -> list[TrackedAlert]:
    """Return the alerts to send now, given when each was last sent (fingerprint → time)."""
    out = []
    for a in alerts:
        if a.state is AlertState.PENDING:
            continue
        last = sent.get(a.fingerprint)
        if a.state is AlertState.RESOLVED:
            if a.resolved_at is None or now - a.resolved_at > policy.resolved_for:
                continue
            if last is None or a.resolved_at > last:
                out.append(a)  # resolved since the last send: say so at once
                continue
        # Unlike Prometheus (`LastSentAt + resendDelay` strictly before now), a send exactly one interval
        # after the last is due: with evaluations on the minute, alerts go out every minute, not every two.
        if last is None or last + policy.resend_interval <= now:
            out.append(a)
    return out


def postable(a: TrackedAlert, *, policy: PushPolicy, external_url: str) -> dict[str, Any]:
    """Return the alert as `POST /api/v2/alerts` takes it. A firing alert carries `validFor` instead of
    `endsAt`: the sender sets `endsAt` from the moment the request actually leaves."""
    labels, rest = pushed_labels(a.labels, a.unkeyed)
    annotations = {**rest, **a.annotations}
    doc: dict[str, Any] = {
        "labels": labels,
        "annotations": annotations,
        "startsAt": rfc3339nano(a.fired_at if a.fired_at is not None else a.active_at),
        "generatorURL": generator_url(a.labels, external_url),
    }
    if a.state is AlertState.RESOLVED and a.resolved_at is not None:
        doc["endsAt"] = rfc3339nano(a.resolved_at)
    else:
        doc[VALID_FOR] = policy.valid_for
    return doc
