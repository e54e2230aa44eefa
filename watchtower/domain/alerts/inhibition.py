"""Inhibition: a firing source alert mutes the target alerts that share its `equal` labels.

The default rules (`default_inhibitions`) are one notification per cause: a critical mutes the warning of its
workload, and work that can never start as configured is not also told as waiting.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .matchers import Matcher, all_match
from .model import AlertState, TrackedAlert
from .rules import never_start, quota_blocked, tiered_wait

# What a workload that can never start would otherwise also fire: each says it waits (or is refused) as if
# time would help, which the never verdict says it will not.
WAIT_ALERTS = (tiered_wait.WARNING, tiered_wait.CRITICAL, quota_blocked.NAME)


@dataclass(frozen=True, slots=True)
class InhibitRule:
    source: tuple[Matcher, ...]
    target: tuple[Matcher, ...]
    equal: tuple[str, ...]


def critical_inhibits_warning() -> InhibitRule:
    """Return the default rule: a critical alert mutes the warning of the same workload.

    Both sides must name a workload: Watchtower's own alerts name none, and with Alertmanager's rule that
    absent labels are equal, "Kubernetes unreachable" (critical) would mute "receiver gone" (a warning about
    something else entirely).

    The never alert (a warning) is left out of its targets: it mutes the critical wait of its workload
    (`never_inhibits_waits`), and two alerts muting each other would leave on-call told of neither (as in
    Alertmanager, whose inhibitor does not ask whether a source is itself muted).
    """
    return InhibitRule(
        source=(Matcher.of("severity", "=", "critical"), Matcher.of("workload", "!=", "")),
        target=(
            Matcher.of("severity", "=", "warning"),
            Matcher.of("workload", "!=", ""),
            Matcher.of("alertname", "!=", never_start.NAME),
        ),
        equal=("namespace", "kind", "workload"),
    )


def never_inhibits_waits() -> InhibitRule:
    """Return the rule "work that can never start is not also told as waiting": while WorkloadCanNeverStart
    fires for a workload, its wait alerts (warning, critical) and its quota-blocked ones are muted. They keep
    their own lifecycle meanwhile: when the verdict clears (a quota raised, a node added) the never alert
    resolves and whichever of them still holds is notified at once, at the workload's real wait."""
    return InhibitRule(
        source=(Matcher.of("alertname", "=", never_start.NAME), Matcher.of("workload", "!=", "")),
        target=(Matcher.of("alertname", "=~", "|".join(WAIT_ALERTS)), Matcher.of("workload", "!=", "")),
        equal=("namespace", "kind", "workload"),
    )


def default_inhibitions() -> tuple[InhibitRule, ...]:
    """Return the inhibitions used when `alerting.inhibit_rules` is not set."""
    return (critical_inhibits_warning(), never_inhibits_waits())


def inhibited(alerts: Iterable[TrackedAlert], rules: Iterable[InhibitRule]) -> dict[str, str]:
    """Return {fingerprint of each muted alert: fingerprint of the firing alert that mutes it}."""
    firing = [a for a in alerts if a.state is AlertState.FIRING]
    out: dict[str, str] = {}
    for rule in rules:
        sources: dict[tuple[str, ...], str] = {}
        for a in firing:
            if all_match(rule.source, a.labels):
                sources.setdefault(tuple(a.labels.get(n, "") for n in rule.equal), a.fingerprint)
        if not sources:
            continue
        for a in firing:
            if a.fingerprint in out or not all_match(rule.target, a.labels):
                continue
            src = sources.get(tuple(a.labels.get(n, "") for n in rule.equal))
            # An alert never inhibits itself, even when it matches both sides.
            if src is not None and src != a.fingerprint:
                out[a.fingerprint] = src
    return out
