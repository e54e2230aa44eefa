"""Idle-allocated GPUs: which workloads hold GPUs they do not use, and whether better work waits for them.

Figures come from Prometheus (DCGM utilisation, kube-state-metrics allocation) as plain `Sample`s; the verdict
also reads the queue (a `QueueSnapshot`). When Prometheus cannot be read the last figures are kept, marked
`stale`, and the alerts they raised are held rather than resolved: silence from a monitor is not good news.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace

from .promql import MIG_INSTANCE, MIG_PROFILE
from .queue import QueueSnapshot, WorkloadStatus
from .tiers import TierPolicy
from .workloads import WorkloadKey

IDLE_ALERT = "GPUIdleWhileQueueWaits"
UNREACHABLE_ALERT = "WatchtowerPrometheusUnreachable"

# A100/H100 MIG profiles are named "<compute slices>g.<memory>gb" out of 7 compute slices per GPU.
_MIG_SLICES_PER_GPU = 7
_PROFILE = re.compile(r"^(\d+)g\.")


@dataclass(frozen=True, slots=True)
class Sample:
    """One series of an instant-query result: its labels and its value."""

    labels: Mapping[str, str]
    value: float


@dataclass(frozen=True, slots=True)
class IdlePolicy:
    threshold: float = 10.0  # percent utilisation; under it the device does nothing useful
    window: float = 1800.0  # seconds the device must stay under the threshold
    # The first-seen figure is sampled at the query step: the first sample found may lie up to one step
    # after the window start even for a device seen all along.
    slack: float = 60.0

    def __post_init__(self) -> None:
        if not 0 < self.threshold <= 100:
            raise ValueError(
                f"idle threshold is a utilisation percentage in (0, 100], got {self.threshold!r}"
            )
        if self.window <= 0:
            raise ValueError(f"idle window must be positive, got {self.window!r}")
        if not 0 <= self.slack < self.window:
            raise ValueError(f"slack must be in [0, window), got {self.slack!r}")


@dataclass(frozen=True, slots=True, order=True)
class DeviceId:
    """A whole GPU (instance "") or one MIG slice of it, on one host."""

    host: str
    gpu: str  # UUID when reported, else the index
    instance: str = ""  # GPU_I_ID


@dataclass(frozen=True, slots=True)
class DeviceUsage:
    id: DeviceId
    namespace: str
    pod: str
    profile: str  # GPU_I_PROFILE: "" for a whole GPU
    util_max: float  # percent over the window
    util_avg: float
    first_seen: float | None = None  # earliest sample within the window

    @property
    def is_slice(self) -> bool:
        return bool(self.profile)

    @property
    def gpu_fraction(self) -> float:
        """Return 1 for a whole GPU, the share of compute slices for a MIG slice (1g → 1/7)."""
        if not self.profile:
            return 1.0
        m = _PROFILE.match(self.profile)
        return int(m.group(1)) / _MIG_SLICES_PER_GPU if m else 0.0


@dataclass(frozen=True, slots=True)
class PodAllocation:
    namespace: str
    pod: str
    gpus: float  # requested nvidia.com/gpu of a running pod
    owner_kind: str = ""
    owner_name: str = ""
    priority_class: str = ""

    @property
    def workload(self) -> WorkloadKey:
        """Return the workload as kube_pod_owner names it; a pod without a controller is its own workload."""
        if not self.owner_kind or self.owner_kind == "<none>" or not self.owner_name:
            return WorkloadKey(self.namespace, "Pod", self.pod)
        return WorkloadKey(self.namespace, self.owner_kind, self.owner_name)


@dataclass(frozen=True, slots=True)
class WorkloadUsage:
    key: WorkloadKey
    team: str
    priority_class: str
    pods: tuple[str, ...]
    gpus_allocated: float  # from kube-state-metrics
    gpus: int  # whole GPUs DCGM sees in use
    slices: int  # MIG slices DCGM sees in use
    idle_gpus: int
    idle_slices: int
    idle_gpu_equivalent: float  # whole GPUs plus each idle slice's share of a GPU
    util_avg: float  # mean over the window across its devices

    @property
    def idle(self) -> bool:
        return self.idle_gpus > 0 or self.idle_slices > 0


@dataclass(frozen=True, slots=True)
class UsageView:
    """GPU usage per workload at `at`; `stale` once Prometheus stopped answering (figures are from `as_of`)."""

    at: float
    as_of: float
    policy: IdlePolicy
    workloads: tuple[WorkloadUsage, ...]
    unmonitored_pods: tuple[tuple[str, str], ...] = ()  # running with GPUs, no DCGM series
    skipped: int = 0  # samples without the labels or value a decision needs
    stale: bool = False

    def idle(self) -> list[WorkloadUsage]:
        return [w for w in self.workloads if w.idle]

    @property
    def idle_gpus(self) -> int:
        return sum(w.idle_gpus for w in self.workloads)

    @property
    def idle_slices(self) -> int:
        return sum(w.idle_slices for w in self.workloads)

    def marked_stale(self, at: float) -> UsageView:
        return replace(self, at=at, stale=True)


# --- samples → records -------------------------------------------------------------------------------------


def _finite(v: float) -> bool:
    return not (math.isnan(v) or math.isinf(v))


def devices_from_samples(
    util_max: Iterable[Sample],
    util_avg: Iterable[Sample],
    first_seen: Iterable[Sample] = (),
) -> tuple[list[DeviceUsage], int]:
    """Return the devices used by a pod, and how many samples were skipped (no pod, no host, not a number).

    The samples carry canonical labels (see `promql.Queries.normalise_dcgm`)."""
    skipped = 0

    def key(s: Sample) -> DeviceId | None:
        host = s.labels.get("Hostname", "")
        gpu = s.labels.get("UUID", "") or s.labels.get("gpu", "")
        if not host or not gpu:
            return None
        return DeviceId(host, gpu, s.labels.get(MIG_INSTANCE, ""))

    avg: dict[DeviceId, float] = {}
    for s in util_avg:
        k = key(s)
        if k is not None and _finite(s.value):
            avg[k] = s.value
    seen: dict[DeviceId, float] = {}
    for s in first_seen:
        k = key(s)
        if k is not None and _finite(s.value):
            seen[k] = s.value
    out: list[DeviceUsage] = []
    for s in util_max:
        k = key(s)
        pod, ns = s.labels.get("pod", ""), s.labels.get("namespace", "")
        if not pod or not ns:
            continue  # a GPU no pod uses: not allocated, not idle-allocated
        if k is None or not _finite(s.value):
            skipped += 1
            continue
        out.append(
            DeviceUsage(
                id=k,
                namespace=ns,
                pod=pod,
                profile=s.labels.get(MIG_PROFILE, ""),
                util_max=s.value,
                util_avg=avg.get(k, s.value),
                first_seen=seen.get(k),
            )
        )
    return out, skipped


def allocations_from_samples(
    gpus: Iterable[Sample], owners: Iterable[Sample] = (), classes: Iterable[Sample] = ()
) -> list[PodAllocation]:
    """Return running pods holding GPUs, with their controller and PriorityClass when KSM reports them."""
    owner: dict[tuple[str, str], tuple[str, str]] = {}
    for s in owners:
        owner[(s.labels.get("namespace", ""), s.labels.get("pod", ""))] = (
            s.labels.get("owner_kind", ""),
            s.labels.get("owner_name", ""),
        )
    pclass = {
        (s.labels.get("namespace", ""), s.labels.get("pod", "")): s.labels.get("priority_class", "")
        for s in classes
    }
    out: list[PodAllocation] = []
    for s in gpus:
        k = (s.labels.get("namespace", ""), s.labels.get("pod", ""))
        if not k[0] or not k[1] or not _finite(s.value) or s.value <= 0:
            continue
        kind, name = owner.get(k, ("", ""))
        out.append(PodAllocation(k[0], k[1], s.value, kind, name, pclass.get(k, "")))
    return out


# --- the view ----------------------------------------------------------------------------------------------


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


# --- the verdict ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class IdleWhileWaiting:
    """Idle GPUs held by `idle` while workloads of an equal or higher tier wait."""

    idle: WorkloadUsage
    idle_tier: str
    waiting: tuple[WorkloadKey, ...]  # highest tier first, then longest wait
    highest_waiting_tier: str


def _tier_of_idle(
    w: WorkloadUsage,
    snapshot: QueueSnapshot,
    tiers: TierPolicy,
    class_priority: Mapping[str, int],
) -> str:
    st = _live_status(w.key, snapshot)
    if st is not None:
        return st.tier
    return tiers.tier_of(class_priority.get(w.priority_class, 0), w.priority_class).name


def idle_while_waiting(
    view: UsageView,
    snapshot: QueueSnapshot,
    tiers: TierPolicy,
    *,
    class_priority: Mapping[str, int] | None = None,
) -> list[IdleWhileWaiting]:
    """Return, per idle workload, the waiting workloads of an equal or higher tier; none waiting → not listed.

    An idle workload's tier comes from the live model, else from its PriorityClass; unknown → lowest tier."""
    waiting = _waiting_by_tier(snapshot, tiers)
    if not waiting:
        return []
    prio = class_priority or {}
    out: list[IdleWhileWaiting] = []
    for w in view.idle():
        tier = _tier_of_idle(w, snapshot, tiers, prio)
        v = _verdict(w, tier, waiting, tiers)
        if v is not None:
            out.append(v)
    return out


def _waiting_by_tier(snapshot: QueueSnapshot, tiers: TierPolicy) -> list[WorkloadStatus]:
    return sorted(snapshot.waiting(), key=lambda s: (tiers.rank(s.tier), -s.wait_seconds, s.key))


def _verdict(
    w: WorkloadUsage, tier: str, waiting: list[WorkloadStatus], tiers: TierPolicy
) -> IdleWhileWaiting | None:
    rank = tiers.rank(tier)
    ahead = [s for s in waiting if tiers.rank(s.tier) <= rank and s.key != w.key]
    if not ahead:
        return None
    return IdleWhileWaiting(w, tier, tuple(s.key for s in ahead), ahead[0].tier)


def _live_status(key: WorkloadKey, snapshot: QueueSnapshot) -> WorkloadStatus | None:
    st = snapshot.by_key(key)
    if st is None:
        # KSM does not say an owner's API group: a Volcano "Job" is a "VolcanoJob" in the live model.
        for cand in snapshot.workloads:
            if cand.namespace == key.namespace and cand.name == key.name:
                return cand
    return st


def recheck_while_stale(
    verdicts: Iterable[IdleWhileWaiting],
    snapshot: QueueSnapshot,
    tiers: TierPolicy,
    *,
    holders_included: bool = True,
) -> list[IdleWhileWaiting]:
    """Return the verdicts that still hold on what Kubernetes says now, while utilisation cannot be read.

    A verdict has two halves. "Its GPUs are idle" comes from Prometheus: unknown during an outage, so the
    last reading stands (an outage must not resolve the alert). "It holds GPUs while equal or higher-tier
    work waits" comes from Kubernetes, which is still watched: a workload that finished, was deleted or
    preempted holds nothing, and a queue that drained has nobody waiting, so on-call is not left with an
    alert they can see is false. With `holders_included` the snapshot carries the idle workloads' own
    statuses (a Tick's `holder_statuses`, or `evaluate(include_running=True)`) and one absent from it is gone;
    without, only the waiting side is rechecked and the holders are taken as still there."""
    waiting = _waiting_by_tier(snapshot, tiers)
    out: list[IdleWhileWaiting] = []
    for v in verdicts:
        st = _live_status(v.idle.key, snapshot)
        if st is None and not holders_included:
            tier = v.idle_tier
        elif st is None or st.gpus_held <= 0:
            continue
        else:
            tier = st.tier
        again = _verdict(v.idle, tier, waiting, tiers)
        if again is not None:
            out.append(again)
    return out


# --- alerts ----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class GpuAlert:
    """An alert condition, active now; its identity is its label set (as Alertmanager fingerprints it)."""

    labels: Mapping[str, str]
    annotations: Mapping[str, str] = field(default_factory=dict)
    value: float = 0.0

    @property
    def name(self) -> str:
        return self.labels["alertname"]

    @property
    def identity(self) -> tuple[tuple[str, str], ...]:
        return tuple(sorted(self.labels.items()))


def idle_alerts(verdicts: Iterable[IdleWhileWaiting], *, severity: str = "warning") -> list[GpuAlert]:
    """Return one GPUIdleWhileQueueWaits per idle workload (never per pod or per GPU)."""
    out: list[GpuAlert] = []
    for v in verdicts:
        w = v.idle
        held = f"{w.idle_gpus} GPU(s)" + (f" and {w.idle_slices} MIG slice(s)" if w.idle_slices else "")
        out.append(
            GpuAlert(
                labels={
                    "alertname": IDLE_ALERT,
                    "severity": severity,
                    "namespace": w.key.namespace,
                    "workload_kind": w.key.kind,
                    "workload": w.key.name,
                    "team": w.team,
                    "tier": v.idle_tier,
                },
                annotations={
                    "summary": f"{w.key} holds {held} idle while {len(v.waiting)} workload(s) of tier "
                    f"{v.highest_waiting_tier} or equal wait",
                    "waiting": ", ".join(str(k) for k in v.waiting[:10]),
                },
                value=w.idle_gpu_equivalent,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class PrometheusHealth:
    up: bool = True
    last_success: float | None = None
    last_failure: float | None = None
    consecutive_failures: int = 0
    last_error: str = ""

    def succeeded(self, now: float) -> PrometheusHealth:
        return PrometheusHealth(True, now, self.last_failure, 0, "")

    def failed(self, now: float, error: str) -> PrometheusHealth:
        return PrometheusHealth(False, self.last_success, now, self.consecutive_failures + 1, error[:500])


def unreachable_alert(health: PrometheusHealth, *, url: str = "", failures: int = 1) -> GpuAlert | None:
    """Return WatchtowerPrometheusUnreachable after `failures` consecutive failed reads, else None."""
    if health.up or health.consecutive_failures < failures:
        return None
    return GpuAlert(
        labels={"alertname": UNREACHABLE_ALERT, "severity": "warning"},
        annotations={
            "summary": f"Prometheus {url} cannot be read ({health.consecutive_failures} attempts): "
            "GPU utilisation figures are stale; Kubernetes-based alerts keep working",
            "error": health.last_error,
        },
        value=float(health.consecutive_failures),
    )
