"""The alert rules. Adding one: a module with `evaluate(RuleInput) -> list[AlertCandidate]`, listed below."""

from __future__ import annotations

from functools import partial

from ..model import AlertCandidate
from . import (
    config_invalid,
    gang_stall,
    gpu_idle,
    never_start,
    preemption_thrash,
    priority_inversion,
    prometheus_unreachable,
    quota_blocked,
    receiver_gone,
    self_health,
    stuck_capacity,
    tiered_wait,
)
from .base import GpuHolder, HolderChanges, Rule, RuleInput, RuleSettings, WatchHealth

RULES: dict[str, Rule] = {
    "tiered_wait": tiered_wait.evaluate,
    "quota_blocked": quota_blocked.evaluate,
    "never_start": never_start.evaluate,
    "gang_stall": gang_stall.evaluate,
    "stuck_capacity": stuck_capacity.evaluate,
    "preemption_thrash": preemption_thrash.evaluate,
    "priority_inversion": priority_inversion.evaluate,
    "self_health": self_health.evaluate,
    "receiver_gone": receiver_gone.evaluate,
    "gpu_idle": gpu_idle.evaluate,
    "prometheus_unreachable": prometheus_unreachable.evaluate,
    "config_invalid": config_invalid.evaluate,
}

# alertname → the rule module that raises it (runbook anchors, `disabled` in the configuration)
ALERTNAMES = {
    tiered_wait.WARNING: "tiered_wait",
    tiered_wait.CRITICAL: "tiered_wait",
    quota_blocked.NAME: "quota_blocked",
    never_start.NAME: "never_start",
    gang_stall.NAME: "gang_stall",
    stuck_capacity.NAME: "stuck_capacity",
    preemption_thrash.NAME: "preemption_thrash",
    priority_inversion.NAME: "priority_inversion",
    self_health.NAME: "self_health",
    receiver_gone.NAME: "receiver_gone",
    gpu_idle.NAME: "gpu_idle",
    prometheus_unreachable.NAME: "prometheus_unreachable",
    config_invalid.NAME: "config_invalid",
}


def evaluate_rules(
    inp: RuleInput, *, blockers: priority_inversion.BlockerIndex | None = None
) -> list[AlertCandidate]:
    """Return every active alert, in rule order; a rule named in `disabled` (or its alertnames) is skipped.

    `blockers`: the priority-inversion rule's index, kept by a caller that evaluates tick after tick (the
    service's alerting), so that the rule costs what changed since the last tick; the same alerts either way.
    """
    out: list[AlertCandidate] = []
    off = inp.settings.disabled
    rules = RULES
    if blockers is not None:
        rules = {**RULES, "priority_inversion": partial(priority_inversion.evaluate, index=blockers)}
    for name, rule in rules.items():
        if name in off:
            continue
        out.extend(c for c in rule(inp) if c.alertname not in off)
    return out


__all__ = [
    "ALERTNAMES",
    "RULES",
    "GpuHolder",
    "HolderChanges",
    "Rule",
    "RuleInput",
    "RuleSettings",
    "WatchHealth",
    "evaluate_rules",
]
