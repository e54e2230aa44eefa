"""The fairness report's week figures over the exporters' and Watchtower's own series, and the per-step
recording rules that let the report integrate recorded values instead of subqueries.
"""

from __future__ import annotations

from .exporters import ExporterQueries
from .names import (
    FAIRNESS_ALLOCATED_GPUS,
    FAIRNESS_CAPACITY_CPU_CORES,
    FAIRNESS_CAPACITY_GPUS,
    FAIRNESS_CAPACITY_MEMORY_BYTES,
    FAIRNESS_EVALUATION,
    FAIRNESS_FREE_WHILE_WAITING_GPUS,
    FAIRNESS_IDLE_ALLOCATED_GPUS,
    FAIRNESS_TEAM_CPU_CORES,
    FAIRNESS_TEAM_GPUS,
    FAIRNESS_TEAM_IDLE_GPUS,
    FAIRNESS_TEAM_MEMORY_BYTES,
    FAIRNESS_TEAM_QUOTA_GPUS,
    FAIRNESS_UNAVAILABLE_GPUS,
    GPU_RESOURCE,
    GPU_UTIL,
    GR_ENGINE_ACTIVE,
    LAST_EVALUATION,
    WAITING_GPUS,
)
from .own import OwnQueries
from .syntax import NamedQuery, braces, duration, quoted

GIB = 2**30
QUOTA_GPU_RESOURCE = "requests.nvidia.com/gpu"  # kube_resourcequota does not sanitise resource names


class FairnessQueries:
    """The week's usage for the fairness report, each expression evaluated once at the week's end.

    A figure per step is integrated over `window` with a subquery, `sum_over_time(x[window:step]) * step /
    3600` (the value at each step held for the step), or averaged with `avg_over_time`: Prometheus returns
    one number per team or one for the cluster, never raw series. A step at which a source's series are
    absent adds nothing: a gap lowers the figures, and `coverage` says by how much.

    Subquery steps fall on multiples of `step` (epoch time); Prometheus 2 includes the step at the window's
    left edge and 3 does not, so the reader (adapters/prometheus/fairness.py) passes a window 1 ms short of
    the week's: both then count the steps of (start, end], and back-to-back weeks share none.

    DRA: kube-state-metrics reports only extended resources (`nvidia.com/gpu` requests and node allocatable);
    GPUs asked through ResourceClaims and published through ResourceSlices are invisible to it, so every
    KSM-based figure here leaves DRA GPUs out. Watchtower's own gauges do count them (`watchtower_gpus`,
    `watchtower_team_gpus_used`, `watchtower_waiting_gpus`), from the claims it watches."""

    def __init__(self, queries: ExporterQueries | None = None, own: OwnQueries | None = None) -> None:
        self.exporters = queries or ExporterQueries()
        self.own = own or OwnQueries()

    def _hours(self, expr: str, window: float, step: float, scale: str = "") -> str:
        w, s = duration(window), duration(step)
        return f"sum_over_time(({expr})[{w}:{s}]) * {step:g} / 3600{scale}"

    def _mean(self, expr: str, window: float, step: float) -> str:
        return f"avg_over_time(({expr})[{duration(window)}:{duration(step)}])"

    # --- per step --------------------------------------------------------------------------------------

    def node_allocatable(self, resource: str) -> str:
        """Allocatable `resource` per node (KSM's sanitised name)."""
        alloc = self.exporters.ksm("kube_node_status_allocatable", f"resource={quoted(resource)}")
        return f"sum by (node) ({alloc})"

    def node_unavailable(self) -> str:
        """1 per node that is cordoned (spec.unschedulable) or not Ready."""
        cordoned = f"max by (node) ({self.exporters.ksm('kube_node_spec_unschedulable')}) == 1"
        ready = self.exporters.ksm("kube_node_status_condition", 'condition="Ready"', 'status="true"')
        return f"({cordoned}) or (max by (node) ({ready}) == 0)"

    def unavailable_gpus(self) -> str:
        """Allocatable GPUs on nodes that are cordoned or not Ready."""
        return f"sum ({self.node_allocatable(GPU_RESOURCE)} and on (node) ({self.node_unavailable()}))"

    def free_gpus(self) -> str:
        """GPUs free on Ready, schedulable nodes: allocatable less what running pods request, per node."""
        avail = f"({self.node_allocatable(GPU_RESOURCE)} unless on (node) ({self.node_unavailable()}))"
        used = f"sum by (node) ({self.exporters.pod_requests(GPU_RESOURCE)})"
        return f"sum ((clamp_min({avail} - on (node) {used}, 0)) or {avail})"

    def waiting_gpus(self) -> str:
        """GPUs waiting work still needs, as Watchtower counts them (DRA claims included): the replica that
        reports most, as leader and standby watch the same queue."""
        return f"max (sum by (instance) ({self.own.series(WAITING_GPUS)}))"

    def free_while_waiting(self) -> str:
        """min(free GPUs, waiting GPUs): what could have run but did not (Slurm's "planned"). Empty unless
        both are known."""
        free, wait = self.free_gpus(), self.waiting_gpus()
        return f"(({free}) <= ({wait})) or (({wait}) < ({free}))"

    def idle_allocated_gpus(self, step: float, threshold: float) -> str:
        """Whole GPUs of running pods with mean utilisation over `step` under `threshold` %, cluster-wide."""
        return f"sum ({self.exporters.team_idle_devices(step, threshold, kind='gpu')})"

    def team_quota_gpus(self) -> str:
        """The hard `requests.nvidia.com/gpu` of the ResourceQuotas of each team's namespaces."""
        hard = self.exporters.normalise_ksm(
            self.exporters.ksm("kube_resourcequota", f'resource="{QUOTA_GPU_RESOURCE}"', 'type="hard"')
        )
        return f"sum by (team) ({self.exporters.with_team(f'sum by (namespace) ({hard})')})"

    # --- over the week ---------------------------------------------------------------------------------

    def team_gpu_hours(self, window: float, step: float) -> str:
        """GPU-hours requested by each team's running pods over `window` (U)."""
        return self.exporters.team_gpu_hours(window, step)

    def team_idle_gpu_hours(self, window: float, step: float, threshold: float) -> str:
        """GPU-hours of each team's running pods under `threshold` % utilisation over `window`."""
        return self.exporters.team_idle_device_hours(window, step, threshold, kind="gpu")

    def team_cpu_core_hours(self, window: float, step: float) -> str:
        """CPU core-hours requested by each team's running pods over `window`."""
        return self._hours(self.exporters.team_requests("cpu"), window, step)

    def team_memory_gib_hours(self, window: float, step: float) -> str:
        """Memory GiB-hours requested by each team's running pods over `window`."""
        return self._hours(self.exporters.team_requests("memory"), window, step, f" / {GIB}")

    def team_quota_gpus_mean(self, window: float, step: float) -> str:
        """Each team's hard GPU quota, averaged over the steps of `window` at which it was reported."""
        return self._mean(self.team_quota_gpus(), window, step)

    def team_quota_gpus_parts(self, window: float, step: float) -> tuple[str, str]:
        """(sum, count) over the steps of `window` of each team's hard GPU quota: the mean's two parts,
        so that means over pieces of a week add up to the week's."""
        return self._parts(self.team_quota_gpus(), window, step)

    def capacity_gpus_parts(self, window: float, step: float) -> tuple[str, str]:
        """(sum, count) over the steps of `window` of the allocatable GPUs of all nodes."""
        return self._parts(f"sum ({self.node_allocatable(GPU_RESOURCE)})", window, step)

    def _parts(self, expr: str, window: float, step: float) -> tuple[str, str]:
        r = f"[{duration(window)}:{duration(step)}]"
        return f"sum_over_time(({expr}){r})", f"count_over_time(({expr}){r})"

    def capacity_gpu_hours(self, window: float, step: float) -> str:
        """Allocatable GPU-hours of all nodes over `window`."""
        return self._hours(f"sum ({self.node_allocatable(GPU_RESOURCE)})", window, step)

    def capacity_gpus_mean(self, window: float, step: float) -> str:
        """Allocatable GPUs of all nodes, averaged over `window`."""
        return self._mean(f"sum ({self.node_allocatable(GPU_RESOURCE)})", window, step)

    def allocated_gpu_hours(self, window: float, step: float) -> str:
        """GPU-hours requested by running pods, cluster-wide, over `window`."""
        return self._hours(self.exporters.cluster_gpus_allocated(), window, step)

    def idle_allocated_gpu_hours(self, window: float, step: float, threshold: float) -> str:
        """GPU-hours of running pods under `threshold` % utilisation, cluster-wide, over `window`."""
        return self._hours(self.idle_allocated_gpus(step, threshold), window, step)

    def free_while_waiting_gpu_hours(self, window: float, step: float) -> str:
        """GPU-hours free while GPU work waited, over `window`."""
        return self._hours(self.free_while_waiting(), window, step)

    def unavailable_gpu_hours(self, window: float, step: float) -> str:
        """GPU-hours of nodes cordoned or not Ready, over `window`."""
        return self._hours(self.unavailable_gpus(), window, step)

    def capacity_cpu_core_hours(self, window: float, step: float) -> str:
        """Allocatable CPU core-hours of all nodes over `window`."""
        return self._hours(f"sum ({self.node_allocatable('cpu')})", window, step)

    def capacity_memory_gib_hours(self, window: float, step: float) -> str:
        """Allocatable memory GiB-hours of all nodes over `window`."""
        return self._hours(f"sum ({self.node_allocatable('memory')})", window, step, f" / {GIB}")

    # --- over the week, from the recorded per-step values (watchtower.fairness.usage.rules) -----------

    def recorded_rules(self, step: float, threshold: float) -> list[tuple[str, str]]:
        """Return (record name, expression) of each per-step value the week figures integrate, the
        expressions the subquery path integrates, so both paths add up the same values."""

        def alloc(resource: str) -> str:
            return f"sum ({self.node_allocatable(resource)})"

        return [
            (FAIRNESS_TEAM_GPUS, self.exporters.team_gpus_allocated()),
            (FAIRNESS_TEAM_IDLE_GPUS, self.exporters.team_idle_devices(step, threshold, kind="gpu")),
            (FAIRNESS_TEAM_CPU_CORES, self.exporters.team_requests("cpu")),
            (FAIRNESS_TEAM_MEMORY_BYTES, self.exporters.team_requests("memory")),
            (FAIRNESS_TEAM_QUOTA_GPUS, self.team_quota_gpus()),
            (FAIRNESS_CAPACITY_GPUS, alloc(GPU_RESOURCE)),
            (FAIRNESS_ALLOCATED_GPUS, self.exporters.cluster_gpus_allocated()),
            (FAIRNESS_IDLE_ALLOCATED_GPUS, self.idle_allocated_gpus(step, threshold)),
            (FAIRNESS_FREE_WHILE_WAITING_GPUS, self.free_while_waiting()),
            (FAIRNESS_UNAVAILABLE_GPUS, self.unavailable_gpus()),
            (FAIRNESS_CAPACITY_CPU_CORES, alloc("cpu")),
            (FAIRNESS_CAPACITY_MEMORY_BYTES, alloc("memory")),
        ]

    def recorded(self, window: float, step: float) -> dict[str, str]:
        """Return the week figures over the recorded series, keyed as PrometheusFairness keys them:
        `sum_over_time(rec[window]) * step / 3600` for hours, `avg_over_time` for means. Evaluated at the
        week's end plus the rules' evaluation offset, so each recorded step pairs with a subquery step."""
        w = duration(window)

        def hours(rec: str, scale: str = "") -> str:
            return f"sum_over_time({rec}[{w}]) * {step:g} / 3600{scale}"

        def mean(rec: str) -> str:
            return f"avg_over_time({rec}[{w}])"

        return {
            "gpu": hours(FAIRNESS_TEAM_GPUS),
            "idle": hours(FAIRNESS_TEAM_IDLE_GPUS),
            "cpu": hours(FAIRNESS_TEAM_CPU_CORES),
            "memory": hours(FAIRNESS_TEAM_MEMORY_BYTES, f" / {GIB}"),
            "quota": mean(FAIRNESS_TEAM_QUOTA_GPUS),
            "capacity": hours(FAIRNESS_CAPACITY_GPUS),
            "capacity_gpus": mean(FAIRNESS_CAPACITY_GPUS),
            "allocated": hours(FAIRNESS_ALLOCATED_GPUS),
            "idle_allocated": hours(FAIRNESS_IDLE_ALLOCATED_GPUS),
            "free_while_waiting": hours(FAIRNESS_FREE_WHILE_WAITING_GPUS),
            "unavailable": hours(FAIRNESS_UNAVAILABLE_GPUS),
            "cpu_capacity": hours(FAIRNESS_CAPACITY_CPU_CORES),
            "memory_capacity": hours(FAIRNESS_CAPACITY_MEMORY_BYTES, f" / {GIB}"),
        }

    def evaluation(self, step: float) -> str:
        """The rules' evaluation-time series recorded at the interval `step` (rules recorded at another
        interval integrate other steps: not taken)."""
        return f'{FAIRNESS_EVALUATION}{{step="{step:g}"}}'

    def recorded_hours(self, window: float, step: float) -> str:
        """Hours of `window` the fairness usage rules were evaluated in at the interval `step`."""
        return f"count_over_time({self.evaluation(step)}[{duration(window)}]) * {step:g} / 3600"

    def last_evaluation(self, window: float, step: float) -> str:
        """When within `window` the rules last ran at the interval `step` (epoch s): their offset in the step."""
        return f"max_over_time({self.evaluation(step)}[{duration(window)}])"

    # --- coverage --------------------------------------------------------------------------------------

    def sources(self) -> dict[str, str]:
        """Return {source name: a selector of series that source always sends while it is scraped}."""
        d, k = self.exporters.config.dcgm_selector, self.exporters.config.ksm_selector
        return {
            "kube-state-metrics": "kube_node_status_allocatable" + braces(k),
            "dcgm-exporter": f"{GPU_UTIL}{braces(d) if d else ''} or {GR_ENGINE_ACTIVE}{braces(d) if d else ''}",
            "watchtower": self.own.series(LAST_EVALUATION),
        }

    def hours_present(self, source: str, window: float, step: float) -> str:
        """Hours of `window` with any sample of `source` (a `sources()` name) within the step ending there."""
        sel = self.sources()[source]
        s = duration(step)
        parts = " or ".join(f"max_over_time({x.strip()}[{s}])" for x in sel.split(" or "))
        return f"count_over_time((group ({parts}))[{duration(window)}:{s}]) * {step:g} / 3600"

    def catalogue(self, *, window: float, step: float, threshold: float) -> list[NamedQuery]:
        """Return every week expression, named and documented, as ExporterQueries.catalogue does."""
        out = []
        for name in (
            "team_gpu_hours",
            "team_idle_gpu_hours",
            "team_cpu_core_hours",
            "team_memory_gib_hours",
            "team_quota_gpus_mean",
            "capacity_gpu_hours",
            "capacity_gpus_mean",
            "allocated_gpu_hours",
            "idle_allocated_gpu_hours",
            "free_while_waiting_gpu_hours",
            "unavailable_gpu_hours",
            "capacity_cpu_core_hours",
            "capacity_memory_gib_hours",
        ):
            fn = getattr(self, name)
            args = (window, step, threshold) if "idle" in name else (window, step)
            out.append(NamedQuery(f"fairness_{name}", (fn.__doc__ or "").split("\n")[0], fn(*args)))
        out += [
            NamedQuery(
                f"coverage_{src}",
                f"Hours of the window with samples from {src}.",
                self.hours_present(src, window, step),
            )
            for src in self.sources()
        ]
        return out
