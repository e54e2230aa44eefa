"""GPU figures as records: Prometheus samples → devices (DCGM) and pod allocations (kube-state-metrics)."""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from ..promql.names import MIG_INSTANCE, MIG_PROFILE
from ..workloads import WorkloadKey

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
    # Earliest sample within the window, at the query step; inf: the first-seen figure was asked and the
    # device has none yet (its first sample came after the window's last step); None: not asked.
    first_seen: float | None = None

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
    first_seen: Iterable[Sample] | None = None,
) -> tuple[list[DeviceUsage], int]:
    """Return the devices used by a pod, and how many samples were skipped (no pod, no host, not a number).
    `first_seen` None: the first-seen figure was not asked, and a device's window is trusted.

    The samples carry canonical labels (see `promql.exporters.ExporterQueries.normalise_dcgm`)."""
    skipped = 0

    def key(s: Sample) -> DeviceId | None:
        host = s.labels.get("Hostname", "")
        gpu = s.labels.get("UUID", "") or s.labels.get("gpu", "")
        if not host or not gpu:
            return None
        return DeviceId(host, gpu, s.labels.get(MIG_INSTANCE, ""))

    # By device and pod: a GPU handed from one pod to the next is two series, and the newcomer's few samples
    # (zero while it pulls its image) must not borrow the old pod's coverage of the window.
    avg: dict[tuple[DeviceId, str, str], float] = {}
    for s in util_avg:
        k = key(s)
        if k is not None and _finite(s.value):
            avg[(k, s.labels.get("namespace", ""), s.labels.get("pod", ""))] = s.value
    seen: dict[tuple[DeviceId, str, str], float] = {}
    for s in first_seen or ():
        k = key(s)
        if k is not None and _finite(s.value):
            seen[(k, s.labels.get("namespace", ""), s.labels.get("pod", ""))] = s.value
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
                util_avg=avg.get((k, ns, pod), s.value),
                # A pod that got a GPU since the window's last step (zero while its image is pulled)
                # has no first-seen sample: newer than any, not idle for the window.
                first_seen=seen.get((k, ns, pod), math.inf) if first_seen is not None else None,
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
