"""The simulated cluster's Events: how each recorder names, folds and counts them, and their TTL.

Two recorders write here: kube-scheduler's events.k8s.io/v1 one (a `series` on a repeat) and client-go's
core/v1 one (a `count` and `lastTimestamp`), which the controllers and Volcano's scheduler use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from watchtower.simulator import objects as obj
from watchtower.simulator.pods import SimPod
from watchtower.simulator.store import Store

EVENT_TTL = 3600.0  # kube-apiserver --event-ttl default
RETRY_EVENT_EVERY = 60.0  # repeated FailedScheduling attempts are folded into the event's series


@dataclass
class _SchedEvent:
    body: dict[str, Any]
    message: str
    bumped: float
    count: int = 1


def ref(p: SimPod) -> dict[str, str]:
    """Return the reference to a pod that its events carry (regarding / involvedObject)."""
    return {
        "kind": "Pod",
        "namespace": p.namespace,
        "name": p.name,
        "uid": p.uid,
        "apiVersion": "v1",
        "resourceVersion": str(p.resource_version),
    }


def scheduling_event(
    p: SimPod, reason: str, message: str, t: float, *, type_: str = "Normal", scheduler: str = ""
) -> dict[str, Any]:
    """Return a scheduler's event on a pod, unnamed: kube-scheduler's events.k8s.io/v1 one, or the core/v1
    one of another `scheduler`'s recorder (Volcano's)."""
    if scheduler:
        return obj.core_event(
            namespace=p.namespace,
            reason=reason,
            message=message,
            involved=ref(p),
            at=t,
            type_=type_,
            component=scheduler,
        )
    return obj.scheduler_event(
        namespace=p.namespace, reason=reason, note=message, regarding=ref(p), at=t, type_=type_
    )


class EventLog:
    """The Events the API server holds, each until EVENT_TTL after its last write."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.events: dict[str, dict[str, Any]] = {}
        self._seen: dict[str, float] = {}
        # No event was last written before this (a lower bound: writes only move times forward), so a tick
        # before it + EVENT_TTL has nothing to expire and skips the scan of every event held.
        self._oldest: float | None = None
        self._scheduling: dict[str, _SchedEvent] = {}  # the scheduler's last event on a pod, by the pod's uid

    def current(self, ev: dict[str, Any]) -> bool:
        """Return whether an event is still held (not yet expired): a repeat of it is counted on it."""
        return ev["metadata"]["name"] in self.events

    def emit(self, ev: dict[str, Any], type_: str) -> None:
        name = ev["metadata"]["name"]
        self.events[name] = ev
        now = self.store.now()
        self._seen[name] = now
        if self._oldest is None or now < self._oldest:
            self._oldest = now
        self.store.emit("Event", ev, type_)

    def expire(self, t: float) -> None:
        if self._oldest is None or t - self._oldest <= EVENT_TTL:
            return
        for name in [n for n, seen in self._seen.items() if t - seen > EVENT_TTL]:
            ev = self.events.pop(name)
            del self._seen[name]
            self.store.emit("Event", ev, "DELETED")  # a deletion is a write: it gets its own version
        self._oldest = min(self._seen.values(), default=None)

    def _name(self, involved: str, t: float) -> str:
        return f"{involved}.{int(t * 1e9) + self.store.next_serial():x}"

    def new_core(
        self, involved: dict[str, str], *, reason: str, message: str, type_: str, component: str, t: float
    ) -> dict[str, Any]:
        """Return a new core/v1 event on `involved`, recorded (ADDED)."""
        ev = obj.core_event(
            namespace=involved["namespace"],
            reason=reason,
            message=message,
            involved=involved,
            at=t,
            type_=type_,
            component=component,
            name=self._name(involved["name"], t),
        )
        ev["metadata"]["uid"] = self.store.new_uid("event")
        self.emit(ev, "ADDED")
        return ev

    def fold(
        self,
        known: dict[str, dict[str, Any]],
        involved: dict[str, str],
        *,
        reason: str,
        message: str,
        type_: str,
        component: str,
        t: float,
    ) -> None:
        """Record a core/v1 event, or count it again when the same words are still current (client-go's
        aggregation by message), in `known` by message."""
        ev = known.get(message)
        if ev is not None and self.current(ev):
            if t - self._seen[ev["metadata"]["name"]] >= RETRY_EVENT_EVERY:
                ev["count"] += 1
                ev["lastTimestamp"] = obj.ts(t)
                self.emit(ev, "MODIFIED")
            return
        known[message] = self.new_core(
            involved, reason=reason, message=message, type_=type_, component=component, t=t
        )

    def on_pod(self, ev: dict[str, Any], p: SimPod, t: float) -> None:
        """Name a scheduler's event on a pod as its recorder does (`<pod>.<hex>`) and record it."""
        ev["metadata"]["name"] = self._name(p.name, t)
        ev["metadata"]["uid"] = self.store.new_uid("event")
        self.emit(ev, "ADDED")

    def forget(self, p: SimPod) -> None:
        """Drop the scheduler's last event on a pod from folding (it was placed, or is gone)."""
        self._scheduling.pop(p.uid, None)

    def failed_scheduling(self, p: SimPod, message: str, t: float, *, scheduler: str = "") -> None:
        """Record a FailedScheduling event, or fold it into the last one when the words are the same."""
        known = self._scheduling.get(p.uid)
        if known is not None and known.message == message and self.current(known.body):
            if t - known.bumped >= RETRY_EVENT_EVERY:
                known.count += 1
                known.bumped = t
                if scheduler:  # core/v1 from Volcano's recorder: the count, not a series
                    known.body["count"], known.body["lastTimestamp"] = known.count, obj.ts(t)
                else:
                    known.body["series"] = {"count": known.count, "lastObservedTime": obj.micro_ts(t)}
                self.emit(known.body, "MODIFIED")
            return
        ev = scheduling_event(p, "FailedScheduling", message, t, type_="Warning", scheduler=scheduler)
        self._scheduling[p.uid] = _SchedEvent(ev, message, t)
        self.on_pod(ev, p, t)
