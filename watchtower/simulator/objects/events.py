"""Events as the API serves them: core/v1 from older controllers, events.k8s.io/v1 from kube-scheduler."""

from __future__ import annotations

from typing import Any

from .meta import micro_ts, new_uid, ts


def core_event(
    *,
    namespace: str,
    reason: str,
    message: str,
    involved: dict[str, str],
    at: float,
    last: float | None = None,
    count: int = 1,
    type_: str = "Normal",
    component: str = "",
    related: dict[str, str] | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """A core/v1 Event as older controllers write it (firstTimestamp/lastTimestamp/count)."""
    ev: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": name or f"{involved.get('name', 'x')}.{int(at * 1000):x}",
            "namespace": namespace,
            "uid": new_uid(f"ev/{namespace}/{name}/{reason}/{at}/{message}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(at),
        },
        "involvedObject": dict(involved),
        "reason": reason,
        "message": message,
        "source": {"component": component} if component else {},
        "firstTimestamp": ts(at),
        "lastTimestamp": ts(last if last is not None else at),
        "count": count,
        "type": type_,
        "eventTime": None,
        "reportingComponent": component,
        "reportingInstance": "",
    }
    if related:
        ev["related"] = dict(related)
    return ev


def scheduler_event(
    *,
    namespace: str,
    reason: str,
    note: str,
    regarding: dict[str, str],
    at: float,
    related: dict[str, str] | None = None,
    type_: str = "Normal",
    series_count: int | None = None,
    series_last: float | None = None,
) -> dict[str, Any]:
    """An event as kube-scheduler writes it through events.k8s.io/v1, read back through core/v1."""
    ev: dict[str, Any] = {
        "kind": "Event",
        "apiVersion": "v1",
        "metadata": {
            "name": f"{regarding.get('name', 'x')}.{int(at * 1e6):x}",
            "namespace": namespace,
            "uid": new_uid(f"sev/{namespace}/{regarding.get('uid')}/{reason}/{at}"),
            "resourceVersion": "1",
            "creationTimestamp": ts(at),
        },
        "involvedObject": dict(regarding),
        "reason": reason,
        "message": note,
        "source": {},
        "firstTimestamp": None,
        "lastTimestamp": None,
        "eventTime": micro_ts(at),
        "type": type_,
        "action": "Scheduling" if reason != "Preempted" else "Preempting",
        "reportingComponent": "default-scheduler",
        "reportingInstance": "default-scheduler-control-plane",
    }
    if related:
        ev["related"] = dict(related)
    if series_count:
        ev["series"] = {"count": series_count, "lastObservedTime": micro_ts(series_last or at)}
    return ev
