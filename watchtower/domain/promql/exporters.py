"""Expressions over the exporters' series: dcgm-exporter's GPUs and MIG slices, kube-state-metrics' pods,
namespaces and requests, from one `QueryConfig`, so a label spelling or a selector is fixed once for the
service, the dashboards and the rule generators.

Why the expressions look the way they do (facts from /work/shared/EXPORTERS.md):

- dcgm-exporter spells its labels in several ways: `Hostname` (released) or `hostname` (main branch);
  `pod`/`namespace`/`container`, or `pod_name`/`pod_namespace`/`container_name` in the old-compatible mode, or
  `exported_pod`/`exported_namespace` when Prometheus scrapes without `honor_labels` and the target carries its
  own `pod` label. Every series is passed through a `label_replace` chain that writes the canonical name (the
  first spelling of each `LabelMapping` entry) from whichever spelling is present; later spellings win,
  because where `exported_pod` exists the plain `pod` names the exporter, not the workload.
- A MIG slice carries `GPU_I_PROFILE` and `GPU_I_ID`. `DCGM_FI_DEV_GPU_UTIL` is not reported for MIG slices;
  `DCGM_FI_PROF_GR_ENGINE_ACTIVE` (a 0-1 ratio) is. Utilisation is therefore `DCGM_FI_DEV_GPU_UTIL` for whole
  GPUs, else the profiling ratio × 100, joined with `or` (which matches on labels, ignoring the metric name).
- Allocation is kube-state-metrics' `kube_pod_container_resource_requests{resource="nvidia_com_gpu"}` (the
  resource name is sanitised there) restricted to pods whose `kube_pod_status_phase{phase="Running"}` is 1,
  joined on `uid` too, because PaddleJob recreates pods under the same name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from .names import FB_USED, GPU_RESOURCE, GPU_UTIL, GR_ENGINE_ACTIVE, MIG_PROFILE
from .syntax import NamedQuery, braces, duration, quoted

DeviceKind = Literal["all", "gpu", "slice"]


@dataclass(frozen=True, slots=True)
class LabelMapping:
    """Label spellings: the first of each tuple is the name the queries output; later ones win when present."""

    pod: tuple[str, ...] = ("pod", "pod_name", "exported_pod")
    namespace: tuple[str, ...] = ("namespace", "pod_namespace", "exported_namespace")
    container: tuple[str, ...] = ("container", "container_name", "exported_container")
    hostname: tuple[str, ...] = ("Hostname", "hostname")
    uuid: tuple[str, ...] = ("UUID", "uuid")

    def __post_init__(self) -> None:
        for name in ("pod", "namespace", "container", "hostname", "uuid"):
            spellings = getattr(self, name)
            if not spellings or not all(_is_label_name(s) for s in spellings):
                raise ValueError(f"label mapping {name!r}: give one or more label names, got {spellings!r}")


@dataclass(frozen=True, slots=True)
class QueryConfig:
    """What differs between clusters: label spellings, series selectors, the namespace label naming a team."""

    labels: LabelMapping = field(default_factory=LabelMapping)
    dcgm_selector: str = ""  # e.g. job="dcgm-exporter"; "" keeps every job
    ksm_selector: str = 'job="kube-state-metrics"'  # the kubernetes-mixin selects KSM this way
    team_label: str = "team"  # namespace label; KSM exposes it as kube_namespace_labels{label_team}
    # KSM series are read as their last value within this many seconds (0: the plain instant value). One
    # failed KSM scrape marks every series stale; read plainly, every allocation would vanish until the next
    # scrape and idle alerts would resolve and fire again. Two scrape intervals bridge one miss; a deleted
    # pod is then counted at most this long after it is gone (a finished pod's phase turns 0 at once).
    ksm_bridge: float = 60.0

    def __post_init__(self) -> None:
        for sel in (self.dcgm_selector, self.ksm_selector):
            if any(c in sel for c in "{}"):
                raise ValueError(f"a selector is the text inside braces, without them: {sel!r}")
        if self.ksm_bridge < 0:
            raise ValueError(f"ksm_bridge is seconds, 0 or more, got {self.ksm_bridge!r}")


def _is_label_name(s: str) -> bool:
    return bool(s) and (s[0].isalpha() or s[0] == "_") and all(c.isalnum() or c == "_" for c in s)


class ExporterQueries:
    """Builds the expressions over dcgm-exporter's and kube-state-metrics' series. Device-level ones return
    one series per GPU or MIG slice with canonical labels (`namespace`, `pod`, `container`, `Hostname`,
    `UUID`, `gpu`, `GPU_I_PROFILE`, `GPU_I_ID`)."""

    def __init__(self, config: QueryConfig | None = None) -> None:
        self.config = config or QueryConfig()

    # --- label normalisation -------------------------------------------------------------------------------

    def _relabel(self, expr: str, groups: tuple[tuple[str, ...], ...]) -> str:
        for spellings in groups:
            canonical = spellings[0]
            for alt in spellings[1:]:
                expr = f'label_replace({expr}, "{canonical}", "$1", "{alt}", "(.+)")'
        return expr

    def normalise_dcgm(self, expr: str) -> str:
        """Return `expr` with pod, namespace, container, hostname and UUID labels under their canonical names."""
        m = self.config.labels
        return self._relabel(expr, (m.pod, m.namespace, m.container, m.hostname, m.uuid))

    def normalise_ksm(self, expr: str) -> str:
        """Return `expr` with pod and namespace under their canonical names (exported_* without honor_labels)."""
        m = self.config.labels
        return self._relabel(expr, (m.pod, m.namespace))

    # --- devices ------------------------------------------------------------------------------------------

    def _devices(self, wrap: Callable[[str], str], *, kind: DeviceKind, ratio_scale: bool = True) -> str:
        d = self.config.dcgm_selector
        mig = {"all": "", "gpu": f'{MIG_PROFILE}=""', "slice": f'{MIG_PROFILE}!=""'}[kind]
        prof = wrap(GR_ENGINE_ACTIVE + braces(d, mig))
        if ratio_scale:
            prof = f"({prof}) * 100"
        if kind == "slice":
            return self.normalise_dcgm(prof)
        whole = wrap(GPU_UTIL + braces(d, f'{MIG_PROFILE}=""'))
        return self.normalise_dcgm(f"({whole}) or ({prof})")

    def device_utilisation(self, *, kind: DeviceKind = "all") -> str:
        """Utilisation now, percent 0-100, per GPU or MIG slice."""
        return self._devices(lambda s: s, kind=kind)

    def device_utilisation_max(self, window: float, *, kind: DeviceKind = "all") -> str:
        """Highest utilisation over `window`, percent, per device: under θ means idle the whole window."""
        w = duration(window)
        return self._devices(lambda s: f"max_over_time({s}[{w}])", kind=kind)

    def device_utilisation_avg(self, window: float, *, kind: DeviceKind = "all") -> str:
        """Mean utilisation over `window`, percent, per device."""
        w = duration(window)
        return self._devices(lambda s: f"avg_over_time({s}[{w}])", kind=kind)

    def device_first_seen(self, window: float, step: float, *, kind: DeviceKind = "all") -> str:
        """Earliest sample time (epoch s) of each device within `window`, at `step` resolution: a device seen
        only recently has not been idle for the whole window, whatever its figures say."""
        w, s = duration(window), duration(step)
        return self._devices(
            lambda x: f"min_over_time(timestamp({x})[{w}:{s}])", kind=kind, ratio_scale=False
        )

    def device_memory_used(self) -> str:
        """Framebuffer memory used now, MiB, per device."""
        return self.normalise_dcgm(FB_USED + braces(self.config.dcgm_selector))

    # --- allocation (kube-state-metrics) ------------------------------------------------------------------

    def ksm(self, metric: str, *matchers: str) -> str:
        """Return KSM's `metric` under the KSM selector and `matchers`, read as its last value within
        `ksm_bridge` (QueryConfig says why)."""
        sel = metric + braces(self.config.ksm_selector, *matchers)
        if self.config.ksm_bridge <= 0:
            return sel
        return f"last_over_time({sel}[{duration(self.config.ksm_bridge)}])"

    def pod_running(self) -> str:
        """1 per running pod (namespace, pod, uid)."""
        return self.normalise_ksm(self.ksm("kube_pod_status_phase", 'phase="Running"') + " == 1")

    def pod_gpus_allocated(self) -> str:
        """GPUs requested by each running pod (namespace, pod)."""
        req = self.normalise_ksm(
            self.ksm("kube_pod_container_resource_requests", f'resource="{GPU_RESOURCE}"')
        )
        return (
            f"sum by (namespace, pod) (sum by (namespace, pod, uid) ({req}) "
            f"and on (namespace, pod, uid) {self.pod_running()})"
        )

    def pod_owner(self) -> str:
        """1 per pod with its controller: labels owner_kind, owner_name ("<none>" for a bare pod)."""
        own = self.normalise_ksm(self.ksm("kube_pod_owner", 'owner_is_controller!="false"'))
        return f"max by (namespace, pod, owner_kind, owner_name) ({own})"

    def pod_priority_class(self) -> str:
        """1 per pod with its PriorityClass name (label priority_class), from kube_pod_info."""
        return f"max by (namespace, pod, priority_class) ({self.normalise_ksm(self.ksm('kube_pod_info'))})"

    def namespace_team(self) -> str:
        """1 per namespace with label `team`: the namespace's team label, else the namespace name."""
        lbl = "label_" + "".join(c if c.isalnum() else "_" for c in self.config.team_label)
        with_label = self.ksm("kube_namespace_labels", f'{lbl}!=""')
        without = self.ksm("kube_namespace_labels", f'{lbl}=""')
        named = f'label_replace({with_label}, "team", "$1", "{lbl}", "(.*)")'
        unnamed = f'label_replace({without}, "team", "$1", "namespace", "(.*)")'
        both = self.normalise_ksm(f"{named} or {unnamed}")
        return f"max by (namespace, team) ({both})"

    def with_team(self, expr: str) -> str:
        """Return `expr` with a `team` label joined from its namespace; a namespace KSM has no
        kube_namespace_labels for (collector off, namespace just created) is its own team, not dropped."""
        team = self.namespace_team()
        return (
            f"({expr} * on (namespace) group_left (team) {team}) or "
            f'label_replace({expr} unless on (namespace) {team}, "team", "$1", "namespace", "(.*)")'
        )

    def pod_requests(self, resource: str) -> str:
        """`resource` requested by each running pod (namespace, pod, node): KSM's sanitised resource name
        (`cpu` in cores, `memory` in bytes, `nvidia_com_gpu`)."""
        req = self.normalise_ksm(
            self.ksm("kube_pod_container_resource_requests", f"resource={quoted(resource)}")
        )
        return (
            f"sum by (namespace, pod, node) (sum by (namespace, pod, uid, node) ({req}) "
            f"and on (namespace, pod, uid) {self.pod_running()})"
        )

    def team_requests(self, resource: str) -> str:
        """`resource` requested by running pods, per team."""
        return f"sum by (team) ({self.with_team(self.pod_requests(resource))})"

    def namespace_gpus_allocated(self) -> str:
        """GPUs requested by running pods, per namespace."""
        return f"sum by (namespace) ({self.pod_gpus_allocated()})"

    def team_gpus_allocated(self) -> str:
        """GPUs requested by running pods, per team."""
        return f"sum by (team) ({self.with_team(self.pod_gpus_allocated())})"

    def cluster_gpus_allocated(self) -> str:
        """GPUs requested by running pods in the whole cluster."""
        return f"sum ({self.pod_gpus_allocated()})"

    # --- utilisation per pod, workload, namespace, team, cluster -----------------------------------------

    def pod_utilisation_avg(self, window: float) -> str:
        """Mean utilisation over `window` of each pod's devices, percent."""
        return f"avg by (namespace, pod) ({self.device_utilisation_avg(window)})"

    def workload_utilisation_avg(self, window: float) -> str:
        """Mean utilisation over `window` per workload (namespace, owner_kind, owner_name), via kube_pod_owner."""
        dev = self.device_utilisation_avg(window)
        return (
            "avg by (namespace, owner_kind, owner_name) "
            f"({dev} * on (namespace, pod) group_left (owner_kind, owner_name) {self.pod_owner()})"
        )

    def namespace_utilisation_avg(self, window: float) -> str:
        """Mean utilisation over `window` of the devices in use by each namespace, percent."""
        return f"avg by (namespace) ({self.device_utilisation_avg(window)})"

    def team_utilisation_avg(self, window: float) -> str:
        """Mean utilisation over `window` of the devices in use by each team, percent."""
        dev = self.device_utilisation_avg(window)
        return f"avg by (team) ({self.with_team(dev)})"

    def cluster_utilisation_avg(self, window: float) -> str:
        """Mean utilisation over `window` of every device DCGM reports, percent."""
        return f"avg ({self.device_utilisation_avg(window)})"

    # --- idle ---------------------------------------------------------------------------------------------

    def pod_idle_devices(self, window: float, threshold: float, *, kind: DeviceKind = "all") -> str:
        """Devices of running pods whose utilisation stayed under `threshold` % for `window`, per pod."""
        dev = self.device_utilisation_max(window, kind=kind)
        return f"count by (namespace, pod) (({dev} < {threshold:g}) and on (namespace, pod) {self.pod_running()})"

    def team_idle_devices(self, step: float, threshold: float, *, kind: DeviceKind = "gpu") -> str:
        """Devices of running pods whose mean utilisation over `step` is under `threshold` %, per team."""
        dev = self.device_utilisation_avg(step, kind=kind)
        busy_or_idle = f"({dev} < {threshold:g}) and on (namespace, pod) {self.pod_running()}"
        return f"count by (team) ({self.with_team(f'({busy_or_idle})')})"

    # --- history ------------------------------------------------------------------------------------------

    def team_gpu_hours(self, window: float, step: float) -> str:
        """GPU-hours allocated to running pods per team over `window`, sampled every `step`."""
        w, s = duration(window), duration(step)
        return f"sum_over_time(({self.team_gpus_allocated()})[{w}:{s}]) * {step:g} / 3600"

    def team_idle_device_hours(
        self, window: float, step: float, threshold: float, *, kind: DeviceKind = "gpu"
    ) -> str:
        """Hours of devices held by running pods with utilisation under `threshold` %, per team over `window`.
        kind "gpu": whole GPUs (GPU-hours); kind "slice": MIG slices (slice-hours, never mixed with GPUs)."""
        w, s = duration(window), duration(step)
        return f"sum_over_time(({self.team_idle_devices(step, threshold, kind=kind)})[{w}:{s}]) * {step:g} / 3600"

    # --- the catalogue ------------------------------------------------------------------------------------

    def catalogue(self, *, window: float, step: float, threshold: float, history: float) -> list[NamedQuery]:
        """Return every expression, named and documented, for dashboards, rule generators and tests."""
        q: list[NamedQuery] = []

        def add(name: str, fn: Callable[..., str], *args: float) -> None:
            q.append(NamedQuery(name, (fn.__doc__ or "").split("\n")[0], fn(*args)))

        add("device_utilisation", self.device_utilisation)
        add("device_utilisation_max", self.device_utilisation_max, window)
        add("device_utilisation_avg", self.device_utilisation_avg, window)
        add("device_first_seen", self.device_first_seen, window, step)
        add("device_memory_used", self.device_memory_used)
        add("pod_running", self.pod_running)
        add("pod_gpus_allocated", self.pod_gpus_allocated)
        add("pod_owner", self.pod_owner)
        add("pod_priority_class", self.pod_priority_class)
        add("namespace_team", self.namespace_team)
        add("namespace_gpus_allocated", self.namespace_gpus_allocated)
        add("team_gpus_allocated", self.team_gpus_allocated)
        add("cluster_gpus_allocated", self.cluster_gpus_allocated)
        add("pod_utilisation_avg", self.pod_utilisation_avg, window)
        add("workload_utilisation_avg", self.workload_utilisation_avg, window)
        add("namespace_utilisation_avg", self.namespace_utilisation_avg, window)
        add("team_utilisation_avg", self.team_utilisation_avg, window)
        add("cluster_utilisation_avg", self.cluster_utilisation_avg, window)
        add("pod_idle_devices", self.pod_idle_devices, window, threshold)
        add("team_idle_devices", self.team_idle_devices, step, threshold)
        add("team_gpu_hours", self.team_gpu_hours, history, step)
        add("team_idle_device_hours", self.team_idle_device_hours, history, step, threshold)
        return q
