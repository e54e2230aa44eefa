"""ResourceQuota refusals: work that never became a pod (DESIGN §3.9), read from its controller (§3.15)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from watchtower.domain.records import Controller, Event, Pod, PriorityClass
from watchtower.domain.workloads import WorkloadKey, workload_kind

GPU_QUOTA_RESOURCE = "requests.nvidia.com/gpu"
# A ResourceQuota counts DRA devices per class as `<class>.deviceclass.resource.k8s.io/devices`
# (kubernetes pkg/quota/v1/evaluator/core/resource_claims.go V1ResourceByDeviceClass).
DRA_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"

# k8s.io/apiserver resourcequota admission: "exceeded quota: %s, requested: %s, used: %s, limited: %s",
# each list "name=qty,name=qty" sorted; wrapped by the controller as 'Error creating: pods "x" is forbidden: ...'.
_EXCEEDED = re.compile(
    r'(?:pods? "(?P<pod>[^"]*)" is forbidden: )?exceeded quota: (?P<quota>[^,]+), '
    r"requested: (?P<requested>.*?), used: (?P<used>.*?), limited: (?P<limited>[^\s]*)"
)


@dataclass(frozen=True, slots=True)
class QuotaRefusal:
    """One controller's pod creation refused by a quota, as its FailedCreate event tells it."""

    workload: WorkloadKey
    quota: str
    pod_name: str
    requested: dict[str, str]
    used: dict[str, str]
    limited: dict[str, str]
    first: float | None
    last: float | None
    count: int
    message: str
    # The controller the event is about, when it is not the workload itself: the ReplicaSet of a Deployment.
    controller: WorkloadKey | None = None

    @property
    def gpus_requested(self) -> int | None:
        return _int_qty(self.requested.get(GPU_QUOTA_RESOURCE))

    @property
    def refused_by(self) -> WorkloadKey:
        """Return the key of the controller whose pod creation was refused."""
        return self.controller if self.controller is not None else self.workload


def _pairs(text: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for part in text.split(","):
        name, sep, qty = part.strip().partition("=")
        if sep and name:
            out[name] = qty
    return out


def _int_qty(q: str | None) -> int | None:
    if q is None:
        return None
    try:
        return int(q)
    except ValueError:
        return None


def quota_refusal(ev: Event) -> QuotaRefusal | None:
    """Return the quota refusal a FailedCreate event reports, or None if it reports something else."""
    if ev.reason != "FailedCreate" or "exceeded quota" not in (ev.message or ""):
        return None
    m = _EXCEEDED.search(ev.message)
    if m is None:
        return None
    reg = ev.regarding
    kind = reg.kind or "Unknown"
    if kind == "Job" and reg.uid == "" and reg.name == "":
        return None
    workload = WorkloadKey(reg.namespace or ev.namespace, workload_kind(kind, reg.api_version), reg.name)
    return QuotaRefusal(
        workload=workload,
        quota=m.group("quota").strip(),
        pod_name=m.group("pod") or "",
        requested=_pairs(m.group("requested")),
        used=_pairs(m.group("used")),
        limited=_pairs(m.group("limited")),
        first=ev.first if ev.first is not None else ev.last,
        last=ev.seen,
        count=ev.count,
        message=ev.message,
    )


def refused_priority(ctrl: Controller | None, classes: Mapping[str, PriorityClass]) -> tuple[int, str]:
    """Return the (priority, class name) admission would give the refused pods, from their template.

    As the Priority admission plugin does: the template's class gives its value; no class, the cluster's
    default class; neither, 0. A class that does not exist (admission would refuse the pod) keeps its
    name, which the tiers may list explicitly.
    """
    if ctrl is not None and ctrl.priority_class:
        pc = classes.get(ctrl.priority_class)
        if pc is not None:
            return pc.value, pc.name
        return ctrl.priority or 0, ctrl.priority_class
    if ctrl is not None and ctrl.priority is not None:
        return ctrl.priority, ""
    for pc in classes.values():
        if pc.global_default:
            return pc.value, pc.name
    return 0, ""


def refused_gpus(ctrl: Controller | None, refusal: QuotaRefusal, pods: Iterable[Pod]) -> tuple[int, int]:
    """Return (GPUs its missing pods ask for, GPUs per pod) of a refused controller.

    `pods` are the workload's live pods; those the controller made count against what it wants. Without
    a controller record, the refused pod's request from the event is all that is known.
    """
    refused = refusal.gpus_requested or 0
    if ctrl is None:
        return refused, refused
    made = sum(
        p.gpus
        for p in pods
        if p.owner is not None and p.owner.name == ctrl.name and p.owner.kind == ctrl.kind
    )
    return max(ctrl.gpus - made, refused), max(ctrl.gpus_per_pod, refused)
