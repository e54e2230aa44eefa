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
        if alertname in AT_ONCE:
            return 0.0
        return self.pending_for


# Alerts whose condition no wait changes: they fire at once whatever the default `for` (a `for` of their
# own in `pending_for_by_rule` still applies).
AT_ONCE = frozenset({"WorkloadCanNeverStart"})


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
    # Built with the constructor, not dataclasses.replace, and sharing the candidate's label and annotation
    # maps rather than copying them (a candidate is never changed once made): this loop runs for every
    # alert on every tick.
    for c in candidates:
        fp = c.fingerprint
        if fp in seen:
            continue
        seen.add(fp)
        old = tracked.get(fp)
        # The candidate's labels even for an alert going on: one fingerprint is one label set but for the
        # unkeyed cluster label, which an alert stored before it existed gains here.
        labels = c.labels
        if old is None or old.state is AlertState.RESOLVED:
            state, active_at, fired_at = AlertState.PENDING, now, None
        else:
            state, active_at, fired_at = old.state, old.active_at, old.fired_at
        if state is AlertState.PENDING and now - active_at >= policy.for_of(c.alertname):
            state, fired_at = AlertState.FIRING, now
        new = TrackedAlert(fp, labels, c.annotations, state, active_at, now, fired_at, unkeyed=c.unkeyed)
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
