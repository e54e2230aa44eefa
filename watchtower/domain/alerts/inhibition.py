"""Inhibition: a firing source alert mutes the target alerts that share its `equal` labels."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .matchers import Matcher, all_match
from .model import AlertState, TrackedAlert


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
    """
    return InhibitRule(
        source=(Matcher.of("severity", "=", "critical"), Matcher.of("workload", "!=", "")),
        target=(Matcher.of("severity", "=", "warning"), Matcher.of("workload", "!=", "")),
        equal=("namespace", "kind", "workload"),
    )


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
