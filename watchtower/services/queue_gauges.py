"""The gauges a tick exports (`QueueGauges`), from the evaluated snapshot and the listed facts' figures.

Everything but the oldest waits follows from the listed facts alone (`ListedFigures`, kept by difference);
each team's fairness now (domain/fairness/live.py) is added from the state's GPUs in use, the waiting GPUs
and the entitlement the configuration asks for.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from watchtower.config.fairness import FairnessConfig
from watchtower.domain.churn import thrash_by_tier
from watchtower.domain.entitlement import QueueLine
from watchtower.domain.fairness.live import Pool, entitled_gpus, fairness_now
from watchtower.domain.forms.kueue.queues import KueueQueueLine
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.domain.tiers import TierPolicy
from watchtower.ports import QueueGauges

from .queue_figures import ListedFigures


def queue_gauges(
    snap: QueueSnapshot, listed: ListedFigures, st: ClusterState, tiers: TierPolicy, *, thrash_count: int
) -> QueueGauges:
    """Return the snapshot's gauges: the listed facts' figures, the oldest waits, quotas and capacity."""
    now = snap.at
    oldest = dict.fromkeys((t.name for t in tiers.tiers), 0.0)
    for tier, since in listed.earliest_starts().items():
        # the same clamp as the status' wait, of the earliest start: the longest wait of the tier
        oldest[tier] = 0.0 if since is None or now - since < 0.0 else now - since
    quotas = [q for q in st.control.quotas.values() if q.hard_gpus is not None]
    waiting_gpus, team_since = listed.team_waits()
    return QueueGauges(
        pending=dict(listed.pending),  # copied: each tick its own
        waiting_gpus=waiting_gpus,
        team_oldest_wait={k: max(0.0, now - since) for k, since in team_since.items()},
        oldest_wait=oldest,
        partial_gangs=dict(listed.partial),
        partial_gang_gpus=dict(listed.partial_gpus),
        quota_used={(q.namespace, q.name): q.used_gpus or 0 for q in quotas},
        quota_hard={(q.namespace, q.name): q.hard_gpus or 0 for q in quotas},
        gated_pods=snap.gated_pods,
        gated_workloads=dict(listed.gated),
        never_workloads=dict(listed.never),
        fragmented_workloads=len(snap.fragmentation),
        gpus_allocatable=snap.capacity.allocatable,
        gpus_used=snap.capacity.used,
        evaluated_at=snap.at,
        **thrash_by_tier(snap, tiers, thrash_count=thrash_count)._asdict(),
    )


def with_fairness(
    gauges: QueueGauges,
    snap: QueueSnapshot,
    st: ClusterState,
    cfg: FairnessConfig,
    volcano: Iterable[QueueLine],
    kueue: Iterable[KueueQueueLine],
) -> QueueGauges:
    """Return `gauges` with each team's fairness now (domain/fairness/live.py)."""
    used: dict[str, float] = {}
    for ns, n in st.gpus_used_by_namespace.items():
        team = st.team_of(ns)
        used[team] = used.get(team, 0.0) + n
    waiting: dict[str, float] = {}
    for (team, _), n in gauges.waiting_gpus.items():
        waiting[team] = waiting.get(team, 0.0) + n
    quotas: dict[str, float] = {}
    for q in st.control.quotas.values():
        if q.hard_gpus is not None:
            team = st.team_of(q.namespace)
            quotas[team] = quotas.get(team, 0.0) + q.hard_gpus
    capacity = float(snap.capacity.allocatable)
    entitled = entitled_gpus(
        capacity,
        {*used, *waiting},
        mode=cfg.entitlement,
        quotas=quotas,
        weights=cfg.weights,
        kueue=[Pool(float(k.nominal_gpus or 0), k.teams) for k in kueue],
        volcano=[Pool(float(v.deserved_gpus or 0), v.teams) for v in volcano],
    )
    teams = fairness_now(capacity, used, waiting, entitled, weights=cfg.weights)
    return dataclasses.replace(gauges, teams=teams)
