"""The report's inputs that come from the cluster as it is now: the teams' entitlement (quota, Volcano
Queues, Kueue ClusterQueues, as the latest Tick lists them), each team's namespaces, and the workloads
running at the moment (for the list of those running longer than 72 h)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

from ..state import ClusterState
from ..tick import Tick
from ..tiers import TierPolicy
from .compute import RunningLine, TeamEntitlement
from .record import workload_name


def entitlements(tick: Tick | None, weights: Mapping[str, float]) -> dict[str, TeamEntitlement]:
    """Return team → what each source says it is entitled to. A Volcano Queue or ClusterQueue used by
    several teams is split between them equally; a team's quota is the sum of its namespaces' GPU quotas."""
    quota: dict[str, float] = defaultdict(float)
    volcano: dict[str, float] = defaultdict(float)
    kueue: dict[str, float] = defaultdict(float)
    if tick is not None:
        for q in tick.quota:
            quota[q.team] += q.hard_gpus
        for v in tick.volcano_queues:
            if v.deserved_gpus is not None and v.teams:
                for t in v.teams:
                    volcano[t] += v.deserved_gpus / len(v.teams)
        for k in tick.kueue_queues:
            if k.nominal_gpus is not None and k.teams:
                for t in k.teams:
                    kueue[t] += k.nominal_gpus / len(k.teams)
    teams = set(quota) | set(volcano) | set(kueue) | set(weights)
    return {
        t: TeamEntitlement(
            quota_gpus=quota.get(t),
            weight=weights.get(t),
            volcano_deserved_gpus=volcano.get(t),
            kueue_nominal_gpus=kueue.get(t),
        )
        for t in sorted(teams)
    }


def team_namespaces(state: ClusterState) -> dict[str, tuple[str, ...]]:
    """Return team → its namespaces (a namespace without the team label is its own team)."""
    out: dict[str, list[str]] = defaultdict(list)
    for name in state.namespaces:
        out[state.team_of(name)].append(name)
    return {t: tuple(sorted(ns)) for t, ns in out.items()}


def running_lines(state: ClusterState, tiers: TierPolicy) -> list[RunningLine]:
    """Return every workload with bound, unfinished GPU pods, started when its first such pod started."""
    started: dict[tuple[str, str], float] = {}
    gpus: dict[tuple[str, str], int] = defaultdict(int)
    tier: dict[tuple[str, str], str] = {}
    for uid, pod in state.pods.items():
        if not pod.bound or pod.terminal or pod.gpus <= 0 or pod.start_time is None:
            continue
        key = state.workload_of_uid.get(uid)
        name = workload_name(key) if key is not None else f"Pod/{pod.name}"
        k = (pod.namespace, name)
        started[k] = min(started.get(k, pod.start_time), pod.start_time)
        gpus[k] += pod.gpus
        tier.setdefault(k, tiers.tier_of(pod.priority, pod.priority_class).name)
    return [
        RunningLine(state.team_of(ns), ns, name, tier[(ns, name)], gpus[(ns, name)], s)
        for (ns, name), s in sorted(started.items())
    ]
