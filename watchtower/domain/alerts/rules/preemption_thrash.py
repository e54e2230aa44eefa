"""WorkloadPreemptionThrash: a workload preempted again and again loses its work each time."""

from __future__ import annotations

from watchtower.domain.disruptions import Preemption
from watchtower.domain.workloads import WorkloadKey

from ..model import AlertCandidate
from .base import RuleInput, human, links

NAME = "WorkloadPreemptionThrash"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    s = inp.settings
    snap = inp.snapshot
    # The queue's own count and its window: the alert says the figure the status page and the API show.
    recent = snap.recent_preemptions
    counts = {k: n for k, n in recent.counts.items() if n >= s.thrash_count}
    if not counts:
        return []
    since = snap.at - recent.window
    last: dict[WorkloadKey, Preemption] = {}
    for pre in snap.preemptions:
        key = pre.victim_workload
        if key is None or key not in counts or pre.at is None or not since <= pre.at <= snap.at:
            continue
        if key not in last or (last[key].at or 0.0) < pre.at:
            last[key] = pre
    by_key = {ws.key: ws for ws in snap.workloads if ws.key in counts}
    out = []
    for key, n in sorted(counts.items()):
        w = by_key.get(key)
        p = last.get(key)
        if w is not None:
            team, tier, pclass, gpus = w.team, w.tier, w.priority_class, w.gpus_requested
        else:
            prio = p.victim_priority if p is not None and p.victim_priority is not None else 0
            pclass = p.victim_priority_class if p is not None else ""
            team, tier, gpus = key.namespace, inp.tiers.tier_of(prio, pclass).name, 0
            if p is not None and p.victim_gpus is not None:
                gpus = p.victim_gpus
        by = ""
        if p is not None and (p.preemptor_name or p.preemptor_uid):
            by = f" Last preempted by {p.preemptor_namespace + '/' if p.preemptor_namespace else ''}" + (
                p.preemptor_name or p.preemptor_uid
            )
            by += f" on node {p.node}." if p.node else "."
        labels = {
            "alertname": NAME,
            "severity": "warning",
            "namespace": key.namespace,
            "team": team,
            "workload": key.name,
            "kind": key.kind,
            "tier": tier,
            "priority_class": pclass,
            "gpus": str(gpus),
        }
        out.append(
            AlertCandidate(
                labels,
                {
                    "summary": f"{key.kind} {key.namespace}/{key.name} was preempted {n} times in "
                    f"{human(recent.window)}",
                    "description": (
                        f"{key.kind} {key.namespace}/{key.name} (tier {tier}) was preempted {n} times within "
                        f"{human(recent.window)} (alert at {s.thrash_count}); each preemption throws away "
                        f"the work since its last checkpoint.{by}"
                    ),
                    "preemptions": str(n),
                    **links(s, NAME, key),
                },
            )
        )
    return out
