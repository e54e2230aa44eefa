"""GPU usage as a use case: read Prometheus, build the idle-GPU view, weigh it against the queue.

`GpuUsageService.on_snapshot(snapshot, now)` refreshes the figures when due and derives the alerts; the
tick (watchtower.runtime.tick_loop) calls it with the Tick's snapshot and the idle holders' statuses
(`idle_holders()` names them beforehand). A failed read never raises out of it: Prometheus being down
must not stop the Kubernetes-based alerts, so the failure becomes health, stale figures and a self-alert.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from watchtower.domain.gpu_usage import (
    GpuAlert,
    IdlePolicy,
    IdleWhileWaiting,
    PrometheusHealth,
    UsageView,
    WorkloadUsage,
    allocations_from_samples,
    devices_from_samples,
    idle_alerts,
    idle_while_waiting,
    recheck_while_stale,
    unreachable_alert,
    usage_view,
)
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.timefmt import rfc3339
from watchtower.domain.workloads import WorkloadKey
from watchtower.ports import PromReader, PromReadError

log = logging.getLogger(__name__)


class GpuUsageService:
    def __init__(
        self,
        *,
        reader: PromReader,
        queries: ExporterQueries,
        policy: IdlePolicy,
        tiers: TierPolicy,
        step: float = 60.0,
        every: float = 60.0,
        unreachable_failures: int = 1,
        team_of: Callable[[str], str] | None = None,
        workload_of: Callable[[WorkloadKey], WorkloadKey] | None = None,
        class_priority: Callable[[], Mapping[str, int]] | None = None,
        holders_included: bool = False,
    ) -> None:
        self.reader = reader
        self.queries = queries
        self.policy = policy
        self.tiers = tiers
        self.step = step
        self.every = every
        self.unreachable_failures = unreachable_failures
        self.team_of = team_of
        self.workload_of = workload_of
        self.class_priority = class_priority
        # True when each snapshot handed in carries the idle holders' own statuses (the service's ticks
        # do): then one absent from it holds nothing any more.
        self.holders_included = holders_included
        self.health = PrometheusHealth(up=False)
        self.view: UsageView | None = None
        self.verdicts: list[IdleWhileWaiting] = []
        self._fresh_verdicts: list[IdleWhileWaiting] = []
        self._idle_alerts: list[GpuAlert] = []
        self._last_attempt: float | None = None
        self._reading = False  # a read is under way

    def _batch(self) -> list[str]:
        q, w = self.queries, self.policy.window
        return [
            q.device_utilisation_max(w),
            q.device_utilisation_avg(w),
            q.device_first_seen(w, self.step),
            q.pod_gpus_allocated(),
            q.pod_owner(),
            q.pod_priority_class(),
        ]

    async def refresh(self, now: float) -> UsageView | None:
        """Read Prometheus at `now` and return the new view; on failure keep the last one, marked stale."""
        self._last_attempt = now
        self._reading = True
        try:
            umax, uavg, seen, gpus, owners, classes = await self.reader.query_many(self._batch(), at=now)
        except PromReadError as e:
            self.health = self.health.failed(now, str(e))
            log.warning("GPU usage figures are stale: %s", e)
            if self.view is not None:
                self.view = self.view.marked_stale(now)
            return self.view
        finally:
            self._reading = False
        devices, skipped = devices_from_samples(umax, uavg, seen)
        allocations = allocations_from_samples(gpus, owners, classes)
        self.view = usage_view(
            devices,
            allocations,
            policy=self.policy,
            now=now,
            team_of=self.team_of,
            skipped=skipped,
            workload_of=self.workload_of,
        )
        self.health = self.health.succeeded(now)
        return self.view

    def due(self, now: float) -> bool:
        # A read still under way (a slow Prometheus, read beside the tick) is not started again meanwhile.
        return not self._reading and (self._last_attempt is None or now - self._last_attempt >= self.every)

    async def refresh_if_due(self, now: float) -> None:
        if self.due(now):
            await self.refresh(now)

    async def on_snapshot(self, snapshot: QueueSnapshot, now: float) -> None:
        """Refresh when due, then weigh idle GPUs against the waiting queue. Stale figures hold the idle alerts
        for as long as the workload still holds GPUs and equal or higher-tier work still waits."""
        if self.due(now):
            await self.refresh(now)
        view = self.view
        if view is None:
            return
        if view.stale:
            # Utilisation is unknown, the queue is not: of the verdicts of the last reading, keep those
            # Kubernetes still bears out (rechecked from that reading each time, so a queue that drains and
            # fills again during the outage brings the same alert back; no new verdict on old figures).
            self.verdicts = recheck_while_stale(
                self._fresh_verdicts, snapshot, self.tiers, holders_included=self.holders_included
            )
            self._idle_alerts = idle_alerts(self.verdicts)
            return
        prio = self.class_priority() if self.class_priority is not None else None
        self.verdicts = idle_while_waiting(view, snapshot, self.tiers, class_priority=prio)
        self._fresh_verdicts = self.verdicts
        self._idle_alerts = idle_alerts(self.verdicts)

    def idle_holders(self) -> set[tuple[str, str]]:
        """Return the (namespace, name) of the idle workloads: a tick evaluates the waiting workloads only,
        and these holders' own statuses give their tier and, during an outage, whether they still hold GPUs."""
        view = self.view
        return {(w.key.namespace, w.key.name) for w in view.idle()} if view is not None else set()

    def alerts(self) -> list[GpuAlert]:
        """Return the active GPU alerts: idle-while-waiting (held while stale) and Prometheus unreachable."""
        out = list(self._idle_alerts)
        down = unreachable_alert(self.health, url=self.reader.url, failures=self.unreachable_failures)
        if down is not None:
            out.append(down)
        return out

    def report(self) -> dict[str, Any]:
        """Return the idle-GPU report for the API and the status page (JSON-ready)."""
        h, v = self.health, self.view
        out: dict[str, Any] = {
            "prometheus": {
                "url": self.reader.url,
                "up": h.up,
                "last_success": rfc3339(h.last_success, "auto"),
                "consecutive_failures": h.consecutive_failures,
                "last_error": h.last_error or None,
            },
            "threshold_percent": self.policy.threshold,
            "window_seconds": self.policy.window,
            "available": v is not None,
            "stale": v.stale if v is not None else True,
            "as_of": rfc3339(v.as_of, "auto") if v is not None else None,
            "idle_gpus": v.idle_gpus if v is not None else 0,
            "idle_slices": v.idle_slices if v is not None else 0,
            "idle_workloads": [],
            "idle_while_waiting": [],
            "unmonitored_pods": [],
            "skipped_series": v.skipped if v is not None else 0,
        }
        if v is None:
            return out
        out["idle_workloads"] = [_workload(w) for w in v.idle()]
        out["idle_while_waiting"] = [
            {
                **_workload(x.idle),
                "tier": x.idle_tier,
                "highest_waiting_tier": x.highest_waiting_tier,
                "waiting": [str(k) for k in x.waiting],
            }
            for x in self.verdicts
        ]
        out["unmonitored_pods"] = [f"{ns}/{pod}" for ns, pod in v.unmonitored_pods]
        return out


def _workload(w: WorkloadUsage) -> dict[str, Any]:
    return {
        "namespace": w.key.namespace,
        "kind": w.key.kind,
        "name": w.key.name,
        "team": w.team,
        "pods": list(w.pods),
        "gpus_allocated": w.gpus_allocated,
        "gpus": w.gpus,
        "slices": w.slices,
        "idle_gpus": w.idle_gpus,
        "idle_slices": w.idle_slices,
        "idle_gpu_equivalent": w.idle_gpu_equivalent,
        "util_avg_percent": round(w.util_avg, 2),
    }
