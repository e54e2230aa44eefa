"""Values for the alert-rule tests, built from plain numbers: workloads, snapshots, rule inputs, pods.

Every policy (the tiers, the rule settings, the queue policy) is built here and only here, with each field
given, so that a default moved elsewhere is fixed in this one file and no test leans on a default.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from watchtower.domain.alerts.matchers import Matcher
from watchtower.domain.alerts.model import AlertCandidate, AlertState, TrackedAlert, fingerprint
from watchtower.domain.alerts.routing import Route
from watchtower.domain.alerts.rules import GpuHolder, RuleInput, RuleSettings, WatchHealth
from watchtower.domain.capacity import Capacity, NodeCapacity
from watchtower.domain.disruptions import Preemption
from watchtower.domain.forms.quota.refusals import QuotaRefusal
from watchtower.domain.gpu_usage import GpuAlert
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue import (
    QueueEvaluator,
    QueuePolicy,
    QueueSnapshot,
    RecentPreemptions,
    TrainingSelector,
    WorkloadFacts,
    WorkloadState,
    WorkloadStatus,
)
from watchtower.domain.records import Condition, Event, Namespace, ObjectRef, OwnerRef, Pod
from watchtower.domain.state import ClusterState
from watchtower.domain.tiers import Tier, TierPolicy
from watchtower.domain.workloads import WorkloadKey

T0 = 1_800_000_000.0  # 2027-01-15T08:00:00Z
NS = "vision"
TEAM = "vision-team"
MINUTE, HOUR = 60.0, 3600.0

# The tiers of DESIGN §4: name, lowest priority, warn after, critical after.
WARN_AFTER = {"critical": 5 * MINUTE, "high": 15 * MINUTE, "medium": 30 * MINUTE, "low": 2 * HOUR}
CRITICAL_AFTER = {"critical": 15 * MINUTE, "high": 1 * HOUR, "medium": 2 * HOUR, "low": 8 * HOUR}
PRIORITY = {"critical": 1_000_000, "high": 900_000, "medium": 500_000, "low": 0}

THRASH_COUNT = 3
# One window for the queue's preemption count and the rule's, so that the two can never disagree here.
THRASH_WINDOW = 1 * HOUR
GANG_STALL_AFTER = 10 * MINUTE
UNREACHABLE_AFTER = 2 * MINUTE
RUNBOOK_URL = "docs/runbooks.md"


def tiers() -> TierPolicy:
    """Return the four tiers of DESIGN §4, critical first."""
    return TierPolicy.of(Tier(n, PRIORITY[n], WARN_AFTER[n], CRITICAL_AFTER[n]) for n in PRIORITY)


TIERS = tiers()


def settings(**changes: Any) -> RuleSettings:
    """Return the rule settings of these tests, every field given, with `changes` applied."""
    fields: dict[str, Any] = {
        "thrash_count": THRASH_COUNT,
        "gang_stall_after": GANG_STALL_AFTER,
        "unreachable_after": UNREACHABLE_AFTER,
        "inversion_tiers": frozenset({"critical", "high"}),
        "status_url": "",
        "dashboard_url": "",
        "runbook_url": RUNBOOK_URL,
        "disabled": frozenset(),
    }
    fields.update(changes)
    return RuleSettings(**fields)


def queue_policy() -> QueuePolicy:
    """Return the queue policy of these tests, every field given (the thrash window is the rules' one)."""
    return QueuePolicy(
        tiers=TIERS,
        selector=TrainingSelector(require_gpu=True, match_labels={}, image_pattern=""),
        quota_window=15 * MINUTE,
        preemption_window=24 * HOUR,
        thrash_window=THRASH_WINDOW,
    )


# --- workloads and snapshots, built directly ---------------------------------------------------------------


def key(name: str = "train", kind: str = "PaddleJob", ns: str = NS) -> WorkloadKey:
    return WorkloadKey(ns, kind, name)


def workload(
    name: str = "train",
    *,
    kind: str = "PaddleJob",
    ns: str = NS,
    team: str = TEAM,
    tier: str = "high",
    state: WorkloadState = WorkloadState.PENDING,
    wait: float = 0.0,
    now: float = T0,
    gpus: int = 8,
    gpus_per_pod: int | None = None,
    gpus_held: int = 0,
    pods_pending: int = 1,
    pods_running: int = 0,
    pods_gated: int = 0,
    preemption: PreemptionVerdict = PreemptionVerdict.UNKNOWN,
    why: str = "0/4 nodes are available: 4 Insufficient nvidia.com/gpu",
    quota: QuotaRefusal | None = None,
    annotations: Mapping[str, str] | None = None,
    ahead: int = 0,
    ahead_higher_tier: int = 0,
) -> WorkloadStatus:
    """Return one workload as a tick sees it at `now`, having waited `wait` seconds."""
    k = WorkloadKey(ns, kind, name)
    since = None if state is WorkloadState.RUNNING else now - wait
    priority = PRIORITY[tier]
    facts = WorkloadFacts(
        key=k,
        team=team,
        tier=tier,
        priority=priority,
        priority_class=f"{tier}-priority",
        state=state,
        since=since,
        warn_after=WARN_AFTER[tier],
        critical_after=CRITICAL_AFTER[tier],
        gpus_requested=gpus,
        gpus_held=gpus_held,
        gpus_per_pod=gpus if gpus_per_pod is None else gpus_per_pod,
        pods_pending=pods_pending,
        pods_running=pods_running,
        pods_gated=pods_gated,
        diagnosis=None,
        scheduling_reason="Unschedulable" if state is WorkloadState.PENDING else "",
        preemption=preemption,
        why=why,
        nominated_node="",
        oldest_pod=f"{name}-worker-0",
        quota=quota,
        preemptions_recent=0,
        annotations=dict(annotations or {}),
        order=(TIERS.rank(tier), -priority, since if since is not None else float("inf"), k),
    )
    return WorkloadStatus(facts, facts.wait_at(now), ahead, ahead_higher_tier)


def node(name: str, *, gpus: int = 8, used: int = 0, schedulable: bool = True) -> NodeCapacity:
    return NodeCapacity(name, gpus, used, schedulable)


def snapshot(
    *workloads: WorkloadStatus,
    at: float = T0,
    nodes: Iterable[NodeCapacity] = (),
    preemptions: Iterable[Preemption] = (),
) -> QueueSnapshot:
    return QueueSnapshot(
        at=at,
        workloads=tuple(workloads),
        capacity=Capacity(tuple(nodes)),
        fragmentation=(),
        preemptions=tuple(preemptions),
        disruptions=(),
        gated_pods=sum(w.pods_gated for w in workloads),
        # Thrash counts come from the queue evaluator (thrash tests build a ClusterState and evaluate it).
        recent_preemptions=RecentPreemptions(THRASH_WINDOW, {}),
    )


def rule_input(
    snap: QueueSnapshot,
    *,
    now: float | None = None,
    rule_settings: RuleSettings | None = None,
    holders: Sequence[GpuHolder] = (),
    health: WatchHealth | None = None,
    gone_receivers: Mapping[str, str] | None = None,
    gpu_alerts: Sequence[GpuAlert] = (),
) -> RuleInput:
    """Return what a rule receives at `now` (the snapshot's time unless given), every field given."""
    return RuleInput(
        snapshot=snap,
        now=snap.at if now is None else now,
        tiers=TIERS,
        settings=settings() if rule_settings is None else rule_settings,
        holders=holders,
        health=health,
        gone_receivers=dict(gone_receivers or {}),
        gpu_alerts=gpu_alerts,
    )


def holder(
    name: str, node_name: str, gpus: int, *, tier: str = "low", kind: str = "PaddleJob", ns: str = "nlp"
) -> GpuHolder:
    """Return the GPUs a running workload of `tier` holds on one node."""
    return GpuHolder(
        WorkloadKey(ns, kind, name),
        node_name,
        gpus,
        PRIORITY[tier],
        f"{tier}-priority",
        tier,
        "PreemptLowerPriority",
    )


def quota_refusal(
    name: str = "train", *, quota: str = "gpu-quota", gpus: int = 8, at: float = T0
) -> QuotaRefusal:
    return QuotaRefusal(
        workload=WorkloadKey(NS, "PaddleJob", name),
        quota=quota,
        pod_name=f"{name}-worker-0",
        requested={"requests.nvidia.com/gpu": str(gpus)},
        used={"requests.nvidia.com/gpu": "16"},
        limited={"requests.nvidia.com/gpu": "16"},
        first=at,
        last=at,
        count=1,
        message="exceeded quota",
    )


# --- what a user reads off the alerts ----------------------------------------------------------------------


def names(alerts: Iterable[AlertCandidate]) -> list[tuple[str, str]]:
    """Return (alertname, severity) of each alert, in order."""
    return [(a.alertname, a.severity) for a in alerts]


def by_workload(alerts: Iterable[AlertCandidate]) -> dict[str, AlertCandidate]:
    """Return the alerts by their workload label; fails if one workload has two."""
    out: dict[str, AlertCandidate] = {}
    for a in alerts:
        assert a.labels["workload"] not in out, f"two alerts for {a.labels['workload']}"
        out[a.labels["workload"]] = a
    return out


# --- a cluster, for the rules that read what the queue worked out from pods ---------------------------------


def cluster(*, team: str = TEAM) -> ClusterState:
    state = ClusterState()
    state.upsert_namespace(Namespace(NS, team))
    return state


def gang_pod(
    job: str,
    i: int,
    *,
    uid: str = "",
    created: float = T0,
    gpus: int = 8,
    tier: str = "low",
    node_name: str = "",
    preempted_at: float | None = None,
) -> Pod:
    """Return pod `i` of PaddleJob `job`: queued, or bound to `node_name`, or preempted at `preempted_at`."""
    bound = bool(node_name)
    scheduled = (
        Condition("True", since=created + 10)
        if bound
        else Condition(
            "False", "Unschedulable", "0/4 nodes are available: 4 Insufficient nvidia.com/gpu.", created + 1
        )
    )
    return Pod(
        uid=uid or f"{job}-{i}-{int(created)}",
        namespace=NS,
        name=f"{job}-worker-{i}",
        created=created,
        phase="Running" if bound else "Pending",
        priority=PRIORITY[tier],
        priority_class=f"{tier}-priority",
        gpus=gpus,
        node=node_name,
        owner=OwnerRef("PaddleJob", job, "batch.paddlepaddle.org/v1", f"uid-{job}"),
        scheduled=scheduled,
        disruption=None
        if preempted_at is None
        else Condition(
            "True", "PreemptionByScheduler", "preempting to accommodate a higher priority pod", preempted_at
        ),
        start_time=created + 11 if bound else None,
        running_since=created + 70 if bound else None,
        deleted_at=preempted_at,
    )


def preempt(
    state: ClusterState,
    job: str,
    at: float,
    *,
    pods: int = 1,
    first: int = 0,
    gpus: int = 8,
    node_name: str = "gpu-0",
) -> list[str]:
    """Record pods `first`.. `first + pods - 1` of `job` preempted at `at` and gone; return their uids."""
    uids = []
    for i in range(first, first + pods):
        running = gang_pod(job, i, created=at - 600, gpus=gpus, node_name=node_name)
        state.upsert_pod(running)
        victim = gang_pod(
            job, i, uid=running.uid, created=at - 600, gpus=gpus, node_name=node_name, preempted_at=at
        )
        state.delete_pod(victim.uid, victim)
        uids.append(victim.uid)
    return uids


def preempted_by(
    state: ClusterState, victim_uid: str, *, ns: str, name: str, node_name: str, at: float
) -> None:
    """Record the scheduler's Preempted event that names who took the victim's place."""
    state.upsert_event(
        Event(
            uid=f"ev-{victim_uid}",
            namespace=NS,
            reason="Preempted",
            message=f"Preempted by {ns}/{name} on node {node_name}",
            regarding=ObjectRef("Pod", NS, "", victim_uid),
            first=at,
            last=at,
        )
    )


def evaluate_queue(state: ClusterState, now: float, *, thrashing_running: bool = False) -> QueueSnapshot:
    """Return the waiting workloads at `now`, as a tick hands them to the rules; with `thrashing_running`,
    plus the running workloads preempted often enough to alert, whose statuses the service's Tick carries."""
    snap = QueueEvaluator(queue_policy()).evaluate(state, now=now)
    if not thrashing_running:
        return snap
    every = QueueEvaluator(queue_policy()).evaluate(state, now=now, include_running=True)
    counts = snap.recent_preemptions.counts
    have = {w.key for w in snap.workloads}
    extra = tuple(w for w in every.workloads if w.key not in have and counts.get(w.key, 0) >= THRASH_COUNT)
    return dataclasses.replace(snap, workloads=(*snap.workloads, *extra))


# --- alerts past the rules: routes, tracked alerts ----------------------------------------------------------

GROUP_WAIT, GROUP_INTERVAL, REPEAT_INTERVAL = 30.0, 5 * MINUTE, 1 * HOUR


def route(
    receiver: str = "team",
    *,
    path: str = "0",
    matchers: Iterable[str] = (),
    group_by: tuple[str, ...] = ("alertname",),
    continue_: bool = False,
    routes: tuple[Route, ...] = (),
) -> Route:
    """Return a routing node with the timings of these tests, every field given."""
    return Route(
        path=path,
        receiver=receiver,
        matchers=tuple(Matcher.parse(m) for m in matchers),
        group_by=group_by,
        group_wait=GROUP_WAIT,
        group_interval=GROUP_INTERVAL,
        repeat_interval=REPEAT_INTERVAL,
        continue_=continue_,
        routes=routes,
    )


def alert_labels(
    name: str = "train",
    *,
    alertname: str = "WorkloadWaitWarning",
    severity: str = "warning",
    ns: str = NS,
    kind: str = "PaddleJob",
    team: str = TEAM,
) -> dict[str, str]:
    """Return the labels a workload alert carries (see rules.base.workload_labels)."""
    return {
        "alertname": alertname,
        "severity": severity,
        "namespace": ns,
        "team": team,
        "workload": name,
        "kind": kind,
        "tier": "high",
        "priority_class": "high-priority",
        "gpus": "8",
    }


def tracked(
    labels: Mapping[str, str], *, state: AlertState = AlertState.FIRING, at: float = T0
) -> TrackedAlert:
    """Return an alert as the lifecycle holds it at `at`: pending, firing, or resolved then."""
    return TrackedAlert(
        fingerprint=fingerprint(labels),
        labels=dict(labels),
        annotations={"summary": f"{labels.get('alertname', '')} {labels.get('workload', '')}"},
        state=state,
        active_at=at,
        last_seen=at,
        fired_at=None if state is AlertState.PENDING else at,
        resolved_at=at if state is AlertState.RESOLVED else None,
    )
