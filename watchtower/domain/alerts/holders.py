"""The GPUs each workload holds per node, as plain data for the priority-inversion rule."""

from __future__ import annotations

from watchtower.domain.model import Pod
from watchtower.domain.state import ClusterState
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.workloads import WorkloadKey

from .rules.base import GpuHolder


def gpu_holders(state: ClusterState, tiers: TierPolicy) -> tuple[GpuHolder, ...]:
    """Return one record per (workload, node) with the GPUs its bound, unfinished pods hold there."""
    gpus: dict[tuple[WorkloadKey, str], int] = {}
    top: dict[tuple[WorkloadKey, str], Pod] = {}
    for uid, key in state.workload_of_uid.items():
        p = state.pods.get(uid)
        if p is None or not p.holds_resources or p.gpus <= 0:
            continue
        k = (key, p.node)
        gpus[k] = gpus.get(k, 0) + p.gpus
        if k not in top or p.priority > top[k].priority:
            top[k] = p
    out = []
    for k in sorted(gpus):
        p = top[k]
        tier = tiers.tier_of(p.priority, p.priority_class).name
        out.append(GpuHolder(k[0], k[1], gpus[k], p.priority, p.priority_class, tier, p.preemption_policy))
    return tuple(out)


def gpus_held_by_node(state: ClusterState, key: WorkloadKey) -> dict[str, int]:
    """Return node → GPUs one workload's bound, unfinished pods hold there (a walk of its pods only)."""
    out: dict[str, int] = {}
    for uid in state.by_workload.get(key, ()):
        p = state.pods.get(uid)
        if p is not None and p.holds_resources and p.gpus > 0:
            out[p.node] = out.get(p.node, 0) + p.gpus
    return out
