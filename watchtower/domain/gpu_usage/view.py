"""The usage view: which devices sit idle, grouped by the workload that holds them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable

from ..workloads import WorkloadKey
from .records import DeviceUsage, IdlePolicy, PodAllocation, UsageView, WorkloadUsage


def is_idle(d: DeviceUsage, policy: IdlePolicy, *, now: float) -> bool:
    """True when the device stayed under the threshold for the whole window (seen since its start)."""
    if d.util_max >= policy.threshold:
        return False
    if d.first_seen is None:
        return True  # no coverage figure asked for: trust the window's max
    return now - d.first_seen >= policy.window - policy.slack


def usage_view(
    devices: Iterable[DeviceUsage],
    allocations: Iterable[PodAllocation],
    *,
    policy: IdlePolicy,
    now: float,
    team_of: Callable[[str], str] | None = None,
    skipped: int = 0,
    workload_of: Callable[[WorkloadKey], WorkloadKey] | None = None,
) -> UsageView:
    """Return usage per workload: only devices of running pods that requested GPUs count (a device labelled
    with the exporter's own pod, or with a finished pod, is not an allocation)."""
    by_pod: dict[tuple[str, str], list[DeviceUsage]] = defaultdict(list)
    for d in devices:
        by_pod[(d.namespace, d.pod)].append(d)
    groups: dict[WorkloadKey, list[PodAllocation]] = defaultdict(list)
    for a in allocations:
        # kube_pod_owner names a Deployment's pods' ReplicaSet: the queue knows them as the Deployment's.
        groups[workload_of(a.workload) if workload_of is not None else a.workload].append(a)
    out: list[WorkloadUsage] = []
    unmonitored: list[tuple[str, str]] = []
    for key, pods in groups.items():
        devs: list[DeviceUsage] = []
        for a in pods:
            mine = by_pod.get((a.namespace, a.pod), [])
            if not mine:
                unmonitored.append((a.namespace, a.pod))
            devs.extend(mine)
        idle = [d for d in devs if is_idle(d, policy, now=now)]
        out.append(
            WorkloadUsage(
                key=key,
                team=team_of(key.namespace) if team_of is not None else key.namespace,
                priority_class=max((a.priority_class for a in pods), default=""),
                pods=tuple(sorted(a.pod for a in pods)),
                gpus_allocated=sum(a.gpus for a in pods),
                gpus=sum(1 for d in devs if not d.is_slice),
                slices=sum(1 for d in devs if d.is_slice),
                idle_gpus=sum(1 for d in idle if not d.is_slice),
                idle_slices=sum(1 for d in idle if d.is_slice),
                idle_gpu_equivalent=round(sum(d.gpu_fraction for d in idle), 6),
                util_avg=sum(d.util_avg for d in devs) / len(devs) if devs else 0.0,
            )
        )
    out.sort(key=lambda w: (-w.idle_gpu_equivalent, w.key))
    return UsageView(
        at=now,
        as_of=now,
        policy=policy,
        workloads=tuple(out),
        unmonitored_pods=tuple(sorted(unmonitored)),
        skipped=skipped,
    )
