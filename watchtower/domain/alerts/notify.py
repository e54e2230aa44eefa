"""Whether a group must be notified now: the decision of Alertmanager's dedup stage."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class NotifyEntry:
    """What one integration was last told about one group (the notification log)."""

    firing: frozenset[str]
    resolved: frozenset[str]
    at: float


def needs_update(
    entry: NotifyEntry | None,
    firing: frozenset[str],
    resolved: frozenset[str],
    *,
    now: float,
    repeat_interval: float,
    send_resolved: bool = True,
) -> bool:
    """Return True when the receiver must hear about this group now."""
    if entry is None:
        # Never told: notify, unless there is only news of things it never heard fired.
        return bool(firing)
    if not firing <= entry.firing:
        return True
    if not firing:
        # Everything resolved: tell it, if it was told something fired; otherwise it never knew.
        return bool(entry.firing)
    if send_resolved and not resolved <= entry.resolved:
        return True
    return entry.at <= now - repeat_interval
