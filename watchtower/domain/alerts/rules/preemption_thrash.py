"""WorkloadPreemptionThrash: a workload preempted again and again loses its work each time."""

from __future__ import annotations

from collections import Counter

from watchtower.domain.disruptions import Preemption
from watchtower.domain.queue import WorkloadStatus
from watchtower.domain.workloads import WorkloadKey

from ..model import AlertCandidate
from .base import RuleInput, human, links

NAME = "WorkloadPreemptionThrash"


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    s = inp.settings
    since = inp.now - s.thrash_window
    counts: Counter[WorkloadKey] = Counter()
    seen: set[tuple[WorkloadKey, int]] = set()
    last: dict[WorkloadKey, Preemption] = {}
    for pre in inp.snapshot.preemptions:
        if pre.victim_workload is None or pre.at is None or not since <= pre.at <= inp.now:
            continue
        # The pods of one gang evicted together are one preemption of the workload.
        mark = (pre.victim_workload, int(pre.at // 60))
        if mark not in seen:
            seen.add(mark)
            counts[pre.victim_workload] += 1
        if pre.victim_workload not in last or (last[pre.victim_workload].at or 0.0) < pre.at:
            last[pre.victim_workload] = pre
    by_key: dict[WorkloadKey, WorkloadStatus] = {}
    for ws in inp.snapshot.workloads:
        # Only workloads with preemptions are looked at: in a storm nearly none of 10,000 have any.
        if ws.preemptions_recent > 0 or ws.key in counts:
            by_key[ws.key] = ws
            counts[ws.key] = max(counts[ws.key], ws.preemptions_recent)
    out = []
    for key, n in sorted((k, n) for k, n in counts.items() if n >= s.thrash_count):
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
                    f"{human(s.thrash_window)}",
                    "description": (
                        f"{key.kind} {key.namespace}/{key.name} (tier {tier}) was preempted {n} times within "
                        f"{human(s.thrash_window)} (alert at {s.thrash_count}); each preemption throws away "
                        f"the work since its last checkpoint.{by}"
                    ),
                    "preemptions": str(n),
                    **links(s, NAME, key),
                },
            )
        )
    return out
