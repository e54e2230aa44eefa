"""An alert's life: inactive → pending (for `for`) → firing → resolved (after `keep_firing_for`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from .model import AlertCandidate, AlertState, TrackedAlert


@dataclass(frozen=True, slots=True)
class LifecyclePolicy:
    pending_for: float = 0.0  # the rule's `for`
    pending_for_by_rule: Mapping[str, float] | None = None  # alertname → `for`, overriding the default
    keep_firing_for: float = 0.0
    resolved_retention: float = 3600.0  # resolved alerts stay listed (and notifiable) this long

    def for_of(self, alertname: str) -> float:
        if self.pending_for_by_rule and alertname in self.pending_for_by_rule:
            return self.pending_for_by_rule[alertname]
        return self.pending_for


@dataclass(frozen=True, slots=True)
class Transition:
    alert: TrackedAlert
    before: AlertState | None  # None: new


def advance(
    tracked: Mapping[str, TrackedAlert],
    candidates: Iterable[AlertCandidate],
    *,
    now: float,
    policy: LifecyclePolicy,
) -> tuple[dict[str, TrackedAlert], list[Transition]]:
    """Return the alerts after one evaluation and the changes of state it caused."""
    out: dict[str, TrackedAlert] = {}
    changes: list[Transition] = []
    seen: set[str] = set()
    for c in candidates:
        fp = c.fingerprint
        if fp in seen:
            continue
        seen.add(fp)
        old = tracked.get(fp)
        if old is None or old.state is AlertState.RESOLVED:
            new = TrackedAlert(fp, dict(c.labels), dict(c.annotations), AlertState.PENDING, now, now)
        else:
            new = replace(old, annotations=dict(c.annotations), last_seen=now)
        if new.state is AlertState.PENDING and now - new.active_at >= policy.for_of(c.alertname):
            new = replace(new, state=AlertState.FIRING, fired_at=now)
        out[fp] = new
        if old is None or old.state is not new.state:
            changes.append(Transition(new, old.state if old is not None else None))
    for fp, old in tracked.items():
        if fp in seen:
            continue
        if old.state is AlertState.PENDING:
            continue  # never fired: it simply stops
        if old.state is AlertState.FIRING:
            if now - old.last_seen >= policy.keep_firing_for:
                new = replace(old, state=AlertState.RESOLVED, resolved_at=now)
                out[fp] = new
                changes.append(Transition(new, AlertState.FIRING))
            else:
                out[fp] = old
            continue
        if old.resolved_at is not None and now - old.resolved_at < policy.resolved_retention:
            out[fp] = old
    return out, changes
