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
    return bool(
        notify_reason(
            entry, firing, resolved, now=now, repeat_interval=repeat_interval, send_resolved=send_resolved
        )
    )


def notify_reason(
    entry: NotifyEntry | None,
    firing: frozenset[str],
    resolved: frozenset[str],
    *,
    now: float,
    repeat_interval: float,
    send_resolved: bool = True,
) -> str:
    """Return why the receiver must hear about this group now, in the words Alertmanager's dedup stage
    gives its webhook body (`notification_reason`); "" when it need not."""
    if entry is None:
        # Never told: notify, unless there is only news of things it never heard fired.
        return FIRST if firing else ""
    if not firing <= entry.firing:
        # After a notice that everything resolved, the group starts over.
        return FIRST if not entry.firing else "new alerts added"
    if not firing:
        # Everything resolved: tell it, if it was told something fired; otherwise it never knew.
        return "all alerts resolved" if entry.firing else ""
    if send_resolved and not resolved <= entry.resolved:
        return "some alerts resolved"
    return "repeat interval elapsed" if entry.at <= now - repeat_interval else ""


FIRST = "first notification"
