"""GPUIdleWhileQueueWaits: a workload holds GPUs it has not used for the idle window while equal or
higher-tier work waits. The finding is made in domain.gpu_usage from Prometheus figures; stale figures keep
it as it was (a monitoring outage resolves nothing)."""

from __future__ import annotations

from watchtower.domain.gpu_usage import IDLE_ALERT
from watchtower.domain.workloads import WorkloadKey

from ..model import AlertCandidate
from .base import RuleInput, links

NAME = IDLE_ALERT


def evaluate(inp: RuleInput) -> list[AlertCandidate]:
    out = []
    for a in inp.gpu_alerts:
        if a.name != NAME:
            continue
        key = WorkloadKey(a.labels["namespace"], a.labels["workload_kind"], a.labels["workload"])
        out.append(AlertCandidate(dict(a.labels), {**a.annotations, **links(inp.settings, NAME, key)}))
    return out
