"""ResourceQuota refusals: work that never became a pod (DESIGN §3.9)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from .model import Event
from .workloads import WorkloadKey, workload_kind

GPU_QUOTA_RESOURCE = "requests.nvidia.com/gpu"

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

    @property
    def gpus_requested(self) -> int | None:
        return _int_qty(self.requested.get(GPU_QUOTA_RESOURCE))


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
