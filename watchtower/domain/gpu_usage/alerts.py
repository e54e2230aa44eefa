"""The GPU findings as alerts: idle while the queue waits, and Prometheus unreachable."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .verdict import IdleWhileWaiting

IDLE_ALERT = "GPUIdleWhileQueueWaits"
UNREACHABLE_ALERT = "WatchtowerPrometheusUnreachable"


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
