"""The fleet page's rows: what each cluster's Watchtower says of its queue, alerts and GPUs, summarised.

Pure: it is given the JSON those Watchtowers answered (`/api/v1/queue`, `/api/v1/alerts`, `/api/v1/gpu/idle`
and the `watchtower_gpus` gauge of `/metrics`) and reads nothing itself. A cluster that did not answer is a
row that says so, never a row of zeros.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True, slots=True)
class TierLine:
    """One tier of one cluster: how much work waits, and the longest wait against the tier's thresholds."""

    tier: str
    waiting: int | None  # None: the cluster has no such tier
    oldest_wait: float | None = None  # seconds; None: nothing waits
    warn_after: float | None = None
    critical_after: float | None = None
    severity: str | None = None  # "warning" or "critical" once past a threshold


@dataclass(frozen=True, slots=True)
class FleetRow:
    name: str
    url: str  # its Watchtower: the row links to it
    here: bool = False  # the cluster this replica watches
    missing: str | None = None  # why it is not shown: it did not answer; None: it answered
    tiers: tuple[TierLine, ...] = ()
    firing: int | None = None  # firing alerts; None: alerting is off there
    gpus_free: int | None = None  # on schedulable nodes; None: not known
    gpus_idle: int | None = None  # allocated yet idle (DCGM via its Prometheus); None: not measured there
    notes: tuple[str, ...] = field(default=())  # what it answered in part (a tier it lacks, ...)

    def as_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "url": self.url,
            "here": self.here,
            "answered": self.missing is None,
            "missing": self.missing,
            "tiers": [
                {
                    "tier": t.tier,
                    "waiting": t.waiting,
                    "oldest_wait_seconds": t.oldest_wait,
                    "warn_after_seconds": t.warn_after,
                    "critical_after_seconds": t.critical_after,
                    "severity": t.severity,
                }
                for t in self.tiers
            ],
            "firing_alerts": self.firing,
            "gpus_free": self.gpus_free,
            "gpus_idle": self.gpus_idle,
            "notes": list(self.notes),
        }


def tier_line(tier: str, queue: Mapping[str, Any] | None) -> TierLine:
    """Return a tier's line from `/api/v1/queue?tier=<tier>&state=waiting&limit=1`: its `total` is the tier's
    waiting work, and its first workload the longest waiting (the queue lists a tier's longest wait first);
    `queue` None: the cluster refused the tier (it has no such tier)."""
    if queue is None:
        return TierLine(tier, None)
    total = int(queue.get("total", 0))
    workloads = queue.get("workloads") or []
    if not total or not workloads:
        return TierLine(tier, total)
    w = workloads[0]
    return TierLine(
        tier,
        total,
        oldest_wait=_number(w.get("wait_seconds")),
        warn_after=_number(w.get("warn_after_seconds")),
        critical_after=_number(w.get("critical_after_seconds")),
        severity=w.get("severity") if w.get("severity") in ("warning", "critical") else None,
    )


def firing_alerts(alerts: Sequence[Mapping[str, Any]] | None) -> int | None:
    """Return how many alerts of `/api/v1/alerts` fire (silenced and inhibited ones are not counted)."""
    if alerts is None:
        return None
    return sum(
        1
        for a in alerts
        if a.get("state") == "firing" and not a.get("silencedBy") and not a.get("inhibitedBy")
    )


def idle_gpus(report: Mapping[str, Any] | None) -> int | None:
    """Return the idle GPUs of `/api/v1/gpu/idle`; None when not measured (no Prometheus, no reading yet)."""
    if report is None or not report.get("available"):
        return None
    return int(report.get("idle_gpus", 0))


def free_gpus(gauge: Mapping[str, float] | None) -> int | None:
    """Return the free GPUs of schedulable nodes from the `watchtower_gpus` gauge (`state` → value)."""
    if gauge is None or "allocatable" not in gauge or "used" not in gauge:
        return None
    return max(0, int(gauge["allocatable"] - gauge["used"]))


def _number(v: object) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) else None


def missing_row(name: str, url: str, why: str) -> FleetRow:
    return FleetRow(name, url, missing=why)
