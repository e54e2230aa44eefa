"""Every PromQL expression Watchtower runs or ships, named and documented in one place.

The service, the dashboards and the rule generators build their queries here, from one `QueryConfig`, so a
label spelling or a selector is fixed once for all of them. Watchtower's own `watchtower_*` series are named
here too, with how each is aggregated (`OwnQueries`): the metrics adapter exports them under these names,
and the rules and dashboards read them back through the same expressions. (Over 400 lines: one file is the
point, as the kubernetes-mixin keeps its queries together.)

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
- Prometheus 3 ranges are left-open: every window is at least 4× the scrape interval (`check_window`).
- Only legacy metric/label names, no `holt_winters`: the same text runs on Prometheus 2 and 3.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

GPU_UTIL = "DCGM_FI_DEV_GPU_UTIL"
GR_ENGINE_ACTIVE = "DCGM_FI_PROF_GR_ENGINE_ACTIVE"
FB_USED = "DCGM_FI_DEV_FB_USED"
GPU_RESOURCE = "nvidia_com_gpu"
MIG_PROFILE = "GPU_I_PROFILE"
MIG_INSTANCE = "GPU_I_ID"

# Watchtower's own series. Counters and histograms are named without the `_total`/`_bucket` the client
# library appends on exposition; queries add it (`total`, `bucket`).
PENDING_WORKLOADS = "watchtower_pending_workloads"
OLDEST_WAIT = "watchtower_oldest_wait_seconds"
PARTIAL_GANGS = "watchtower_partial_gangs"
PARTIAL_GANG_GPUS_HELD = "watchtower_partial_gang_gpus_held"
QUOTA_GPUS_USED = "watchtower_quota_gpus_used"
QUOTA_GPUS_HARD = "watchtower_quota_gpus_hard"
GATED_PODS = "watchtower_gated_pods"
FRAGMENTED_WORKLOADS = "watchtower_fragmented_workloads"
GPUS = "watchtower_gpus"
DRA_UNRESOLVED_PODS = "watchtower_dra_unresolved_pods"
LAST_EVALUATION = "watchtower_last_evaluation_timestamp_seconds"
WATCH_RESTARTS = "watchtower_watch_restarts"
PICTURE_STALENESS = "watchtower_picture_staleness_seconds"
TIME_TO_SCHEDULE = "watchtower_time_to_schedule_seconds"
STARTUP_LATENCY = "watchtower_startup_latency_seconds"
PREEMPTIONS = "watchtower_preemptions"
PREEMPTION_GPU_HOURS_LOST = "watchtower_preemption_gpu_hours_lost"
MALFORMED_OBJECTS_SKIPPED = "watchtower_malformed_objects_skipped"
EVALUATION_DURATION = "watchtower_evaluation_duration_seconds"
SNAPSHOT_CONSUMER_FAILURES = "watchtower_snapshot_consumer_failures"
NOTIFICATIONS_SENT = "watchtower_notifications_sent"
NOTIFICATIONS_FAILED = "watchtower_notifications_failed"
NOTIFICATIONS_RETRIED = "watchtower_notifications_retried"
OUTBOX_DEPTH = "watchtower_outbox_depth"
OUTBOX_OLDEST_UNDELIVERED = "watchtower_outbox_oldest_undelivered_seconds"
ALERTS_FIRING = "watchtower_alerts_firing"
TEAM_PREEMPTIONS = "watchtower_team_preemptions"
TEAM_PREEMPTION_GPU_HOURS_LOST = "watchtower_team_preemption_gpu_hours_lost"
PREEMPTION_TO_RUNNING = "watchtower_preemption_to_running_seconds"
DISRUPTIONS = "watchtower_disruptions"
THRASHING_WORKLOADS = "watchtower_thrashing_workloads"
MOST_PREEMPTIONS = "watchtower_workload_preemptions_max"
CONFIG_VALID = "watchtower_config_valid"
CONFIG_RELOADS = "watchtower_config_reload"
LEADER = "watchtower_leader"
LEADER_TRANSITIONS = "watchtower_leader_transitions"
# The fairness gauges (domain/fairness/live.py computes them each tick), per team unless said.
WAITING_GPUS = "watchtower_waiting_gpus"  # team, tier: GPUs waiting work still needs
TEAM_OLDEST_WAIT = "watchtower_team_oldest_wait_seconds"  # team, tier
TEAM_GPUS_USED = "watchtower_team_gpus_used"
TEAM_GPUS_ENTITLED = "watchtower_team_gpus_entitled"
TEAM_GPUS_DEMAND = "watchtower_team_gpus_demand"
TEAM_GPUS_FAIR_SHARE = "watchtower_team_gpus_fair_share"
TEAM_SATISFACTION = "watchtower_team_satisfaction"  # only teams with demand: Jain's index is over them

# Recording rules shipped with the dashboards that read them (alerts/recording.py writes them).
TIME_TO_SCHEDULE_P50 = f"tier:{TIME_TO_SCHEDULE}:p50"
TIME_TO_SCHEDULE_P95 = f"tier:{TIME_TO_SCHEDULE}:p95"
JAIN_INDEX = f"cluster:{TEAM_SATISFACTION}:jain_index"
TEAM_ATTAINMENT = "team:watchtower_gpu_attainment:ratio"
TEAM_IDLE_SHARE = "team:watchtower_idle_allocated_gpus:ratio"
CLUSTER_IDLE_SHARE = "cluster:watchtower_idle_allocated_gpus:ratio"
# The fairness report's per-step values (group watchtower.fairness.usage.rules, evaluated every
# `fairness.step`): the week figures integrate these instead of subqueries (FairnessQueries.recorded).
FAIRNESS_TEAM_GPUS = "team:watchtower_fairness_gpus:step"
FAIRNESS_TEAM_IDLE_GPUS = "team:watchtower_fairness_idle_gpus:step"
FAIRNESS_TEAM_CPU_CORES = "team:watchtower_fairness_cpu_cores:step"
FAIRNESS_TEAM_MEMORY_BYTES = "team:watchtower_fairness_memory_bytes:step"
FAIRNESS_TEAM_QUOTA_GPUS = "team:watchtower_fairness_quota_gpus:step"
FAIRNESS_CAPACITY_GPUS = "cluster:watchtower_fairness_capacity_gpus:step"
FAIRNESS_ALLOCATED_GPUS = "cluster:watchtower_fairness_allocated_gpus:step"
FAIRNESS_IDLE_ALLOCATED_GPUS = "cluster:watchtower_fairness_idle_allocated_gpus:step"
FAIRNESS_FREE_WHILE_WAITING_GPUS = "cluster:watchtower_fairness_free_while_waiting_gpus:step"
FAIRNESS_UNAVAILABLE_GPUS = "cluster:watchtower_fairness_unavailable_gpus:step"
FAIRNESS_CAPACITY_CPU_CORES = "cluster:watchtower_fairness_capacity_cpu_cores:step"
FAIRNESS_CAPACITY_MEMORY_BYTES = "cluster:watchtower_fairness_capacity_memory_bytes:step"
# vector(time()) with a `step` label: when the group ran (its evaluation offset within the step) and at
# what interval, whatever the cluster sent; counting its samples gives the hours the rules cover.
FAIRNESS_EVALUATION = "cluster:watchtower_fairness_evaluation_timestamp:step"

# Prometheus 3 drops the sample at the left edge of a range: with fewer than 4 scrapes per window a single
# missed scrape empties the range.
MIN_SCRAPES_PER_WINDOW = 4

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


def duration(seconds: float) -> str:
    """Return a PromQL duration for `seconds`: 1800 → "30m", 604800 → "1w", 1.5 → "1500ms"."""
    if seconds <= 0:
        raise ValueError(f"a PromQL duration must be positive, got {seconds!r}")
    ms = round(seconds * 1000)
    for unit, size in (("w", 604_800_000), ("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def check_window(window: float, scrape_interval: float) -> None:
    """Raise ValueError unless `window` spans at least 4 scrapes (left-open ranges in Prometheus 3)."""
    if window < MIN_SCRAPES_PER_WINDOW * scrape_interval:
        raise ValueError(
            f"window {duration(window)} is shorter than {MIN_SCRAPES_PER_WINDOW} × the scrape interval "
            f"{duration(scrape_interval)}: one missed scrape would empty it"
        )


def _is_label_name(s: str) -> bool:
    return bool(s) and (s[0].isalpha() or s[0] == "_") and all(c.isalnum() or c == "_" for c in s)


def quoted(value: str) -> str:
    """Return `value` as a PromQL double-quoted string: `a"b` → `"a\\"b"`. Every label value (and `=~`
    pattern) a query is built from goes through here, so a quote, a backslash or a newline in a tier, a
    team or a resource name stays inside its string instead of ending the selector."""
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n").replace("\r", "\\r")
    return f'"{escaped}"'


def _sel(*parts: str) -> str:
    return "{" + ",".join(p for p in parts if p) + "}"


def total(counter: str) -> str:
    """Return the exposed name of a counter: `watchtower_preemptions` → `watchtower_preemptions_total`."""
    return counter + "_total"


def bucket(histogram: str) -> str:
    """Return the name of a histogram's bucket series."""
    return histogram + "_bucket"


def _agg(op: str, by: tuple[str, ...], expr: str) -> str:
    return f"{op} by ({', '.join(by)}) ({expr})" if by else f"{op}({expr})"


class OwnQueries:
    """Expressions over Watchtower's own series, each aggregated the one way that series allows.

    `selector` goes inside every selector's braces (`job="watchtower"`; "" for none). `by` names the labels
    kept; `window` is a range as text: a PromQL duration, or Grafana's `$__rate_interval`."""

    def __init__(self, selector: str = "") -> None:
        if any(c in selector for c in "{}"):
            raise ValueError(f"a selector is the text inside braces, without them: {selector!r}")
        self.selector = selector

    def series(self, name: str, *matchers: str) -> str:
        """Return `name` with the selector and `matchers` (text such as `tier="low"`; "" is left out)."""
        parts = [p for p in (self.selector, *matchers) if p]
        return f"{name}{{{','.join(parts)}}}" if parts else name

    def pending(self, *by: str, tier: str = "") -> str:
        """Waiting workloads (pending, partial gang or quota-blocked), summed over what `by` leaves out."""
        return _agg("sum", by, self.series(PENDING_WORKLOADS, f"tier={quoted(tier)}" if tier else ""))

    def oldest_wait(self, *by: str, tier: str = "") -> str:
        """Longest current wait, seconds: max, not sum, as two replicas (leader and standby) report the
        same queue."""
        return _agg("max", by, self.series(OLDEST_WAIT, f"tier={quoted(tier)}" if tier else ""))

    def partial_gangs(self, *by: str) -> str:
        """Gangs with some pods bound and some waiting."""
        return _agg("sum", by, self.series(PARTIAL_GANGS))

    def partial_gang_gpus_held(self, *by: str) -> str:
        """GPUs held by the bound pods of partial gangs."""
        return _agg("sum", by, self.series(PARTIAL_GANG_GPUS_HELD))

    def quota_use(self, *by: str) -> str:
        """GPU quota used as a share of its hard limit (0-1), where there is a limit."""
        used, hard = (
            _agg("sum", by, self.series(QUOTA_GPUS_USED)),
            _agg("sum", by, self.series(QUOTA_GPUS_HARD)),
        )
        return f"{used} / {hard} > 0"

    def _rate(self, fn: str, name: str, window: str, by: tuple[str, ...]) -> str:
        return _agg("sum", by, f"{fn}({self.series(name)}[{window}])")

    def time_to_schedule_quantile(self, q: float, window: str) -> str:
        """The `q` quantile per tier of creation-to-binding times over `window`."""
        return f"histogram_quantile({q:g}, {self._rate('rate', bucket(TIME_TO_SCHEDULE), window, ('tier', 'le'))})"

    def scheduled_per_bucket(self, window: str, *by: str) -> str:
        """Pods scheduled within `window`, per wait bucket (`le`) and `by`."""
        return self._rate("increase", bucket(TIME_TO_SCHEDULE), window, (*by, "le"))

    def preemption_rate(self, window: str, *by: str) -> str:
        """Pods preempted per second over `window`."""
        return self._rate("rate", total(PREEMPTIONS), window, by)

    def gpu_hours_lost_rate(self, window: str, *by: str) -> str:
        """GPU-hours of work lost to preemption per second over `window`."""
        return self._rate("rate", total(PREEMPTION_GPU_HOURS_LOST), window, by)

    def team_preemption_rate(self, window: str, *by: str) -> str:
        """Pods preempted per second over `window`, by victim and preemptor team as `by` keeps them."""
        return self._rate("rate", total(TEAM_PREEMPTIONS), window, by)

    def team_gpu_hours_lost_rate(self, window: str, *by: str) -> str:
        """GPU-hours lost to preemption per second over `window`, by victim and preemptor team."""
        return self._rate("rate", total(TEAM_PREEMPTION_GPU_HOURS_LOST), window, by)

    def preemption_to_running_quantile(self, q: float, window: str) -> str:
        """The `q` quantile per preemptor tier of victim eviction to preemptor running, over `window`."""
        return f"histogram_quantile({q:g}, {self._rate('rate', bucket(PREEMPTION_TO_RUNNING), window, ('tier', 'le'))})"

    def preemptors_running_per_bucket(self, window: str, *by: str) -> str:
        """Preemptors that started within `window`, per latency bucket (`le`) and `by`."""
        return self._rate("increase", bucket(PREEMPTION_TO_RUNNING), window, (*by, "le"))

    def disruption_rate(self, window: str, *by: str) -> str:
        """Pods taken away for reasons other than preemption, per second over `window`."""
        return self._rate("rate", total(DISRUPTIONS), window, by)

    def thrashing(self, *by: str) -> str:
        """Workloads preempted at least the thrash count of times within the thrash window: the worst
        replica, as leader and standby count the same cluster."""
        return _agg("max", by, self.series(THRASHING_WORKLOADS))

    def most_preemptions(self, *by: str, tier: str = "") -> str:
        """The most preemptions one workload had within the thrash window."""
        return _agg("max", by, self.series(MOST_PREEMPTIONS, f"tier={quoted(tier)}" if tier else ""))

    def evaluation_changes(self, window: str) -> str:
        """How often the last-evaluation time moved within `window`: 0 when Watchtower has stalled."""
        return f"changes({self.series(LAST_EVALUATION)}[{window}])"

    def config_invalid(self, *by: str) -> str:
        """1 where the configuration file changed to one that could not be applied (the worst replica)."""
        return f"{_agg('max', by, f'1 - {self.series(CONFIG_VALID)}')} > 0"

    def per_team(self, name: str, *matchers: str) -> str:
        """One of the per-team fairness gauges (TEAM_GPUS_*, TEAM_SATISFACTION) per team: the highest
        replica's, as leader and standby report the same cluster."""
        return _agg("max", ("team",), self.series(name, *matchers))

    def team_mean(self, name: str, window: str, *matchers: str) -> str:
        """A per-team gauge's mean over `window` (a duration or Grafana's `$__range`), per team: times the
        window's hours, GPU-hours."""
        return _agg("max", ("team",), f"avg_over_time({self.series(name, *matchers)}[{window}])")

    def team_waiting_gpus(self, *by: str, team: str = "") -> str:
        """GPUs waiting work still needs, per `by` (team, tier): max over replicas of each pair, then summed."""
        sel = self.series(WAITING_GPUS, f"team=~{quoted(team)}" if team else "")
        return _agg("sum", by, _agg("max", ("team", "tier"), sel))

    def team_oldest_wait(self, *by: str, team: str = "") -> str:
        """Longest current wait per `by` (team, tier)."""
        return _agg("max", by, self.series(TEAM_OLDEST_WAIT, f"team=~{quoted(team)}" if team else ""))

    def jain_index(self) -> str:
        """Jain's index (Σx)² / (n·Σx²) of the satisfaction x of the teams with demand (1: all equally
        satisfied; 1/n: one team has it all); nothing when there is no such team or every x is 0."""
        x = self.per_team(TEAM_SATISFACTION)
        return f"(sum ({x}) ^ 2) / ((count ({x}) * sum ({x} ^ 2)) > 0)"

    def attainment(self) -> str:
        """GPUs used over GPUs entitled, per team with an entitlement (U/E now)."""
        return f"{self.per_team(TEAM_GPUS_USED)} / ({self.per_team(TEAM_GPUS_ENTITLED)} > 0)"

    def staleness(self, *by: str) -> str:
        """Seconds since the cluster source last heard from the API server (all kinds): the worst replica."""
        return _agg("max", by, self.series(PICTURE_STALENESS, 'kind="all"'))


@dataclass(frozen=True, slots=True)
class NamedQuery:
    name: str
    doc: str
    expr: str


class Queries:
    """Builds the expressions. Device-level ones return one series per GPU or MIG slice with canonical labels
    (`namespace`, `pod`, `container`, `Hostname`, `UUID`, `gpu`, `GPU_I_PROFILE`, `GPU_I_ID`)."""

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
        prof = wrap(GR_ENGINE_ACTIVE + _sel(d, mig))
        if ratio_scale:
            prof = f"({prof}) * 100"
        if kind == "slice":
            return self.normalise_dcgm(prof)
        whole = wrap(GPU_UTIL + _sel(d, f'{MIG_PROFILE}=""'))
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
        return self.normalise_dcgm(FB_USED + _sel(self.config.dcgm_selector))

    # --- allocation (kube-state-metrics) ------------------------------------------------------------------

    def _ksm(self, metric: str, *matchers: str) -> str:
        sel = metric + _sel(self.config.ksm_selector, *matchers)
        if self.config.ksm_bridge <= 0:
            return sel
        return f"last_over_time({sel}[{duration(self.config.ksm_bridge)}])"

    def pod_running(self) -> str:
        """1 per running pod (namespace, pod, uid)."""
        return self.normalise_ksm(self._ksm("kube_pod_status_phase", 'phase="Running"') + " == 1")

    def pod_gpus_allocated(self) -> str:
        """GPUs requested by each running pod (namespace, pod)."""
        req = self.normalise_ksm(
            self._ksm("kube_pod_container_resource_requests", f'resource="{GPU_RESOURCE}"')
        )
        return (
            f"sum by (namespace, pod) (sum by (namespace, pod, uid) ({req}) "
            f"and on (namespace, pod, uid) {self.pod_running()})"
        )

    def pod_owner(self) -> str:
        """1 per pod with its controller: labels owner_kind, owner_name ("<none>" for a bare pod)."""
        own = self.normalise_ksm(self._ksm("kube_pod_owner", 'owner_is_controller!="false"'))
        return f"max by (namespace, pod, owner_kind, owner_name) ({own})"

    def pod_priority_class(self) -> str:
        """1 per pod with its PriorityClass name (label priority_class), from kube_pod_info."""
        return f"max by (namespace, pod, priority_class) ({self.normalise_ksm(self._ksm('kube_pod_info'))})"

    def namespace_team(self) -> str:
        """1 per namespace with label `team`: the namespace's team label, else the namespace name."""
        lbl = "label_" + "".join(c if c.isalnum() else "_" for c in self.config.team_label)
        with_label = self._ksm("kube_namespace_labels", f'{lbl}!=""')
        without = self._ksm("kube_namespace_labels", f'{lbl}=""')
        named = f'label_replace({with_label}, "team", "$1", "{lbl}", "(.*)")'
        unnamed = f'label_replace({without}, "team", "$1", "namespace", "(.*)")'
        both = self.normalise_ksm(f"{named} or {unnamed}")
        return f"max by (namespace, team) ({both})"

    def _with_team(self, expr: str) -> str:
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
            self._ksm("kube_pod_container_resource_requests", f"resource={quoted(resource)}")
        )
        return (
            f"sum by (namespace, pod, node) (sum by (namespace, pod, uid, node) ({req}) "
            f"and on (namespace, pod, uid) {self.pod_running()})"
        )

    def team_requests(self, resource: str) -> str:
        """`resource` requested by running pods, per team."""
        return f"sum by (team) ({self._with_team(self.pod_requests(resource))})"

    def namespace_gpus_allocated(self) -> str:
        """GPUs requested by running pods, per namespace."""
        return f"sum by (namespace) ({self.pod_gpus_allocated()})"

    def team_gpus_allocated(self) -> str:
        """GPUs requested by running pods, per team."""
        return f"sum by (team) ({self._with_team(self.pod_gpus_allocated())})"

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
        return f"avg by (team) ({self._with_team(dev)})"

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
        return f"count by (team) ({self._with_team(f'({busy_or_idle})')})"

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


GIB = 2**30
QUOTA_GPU_RESOURCE = "requests.nvidia.com/gpu"  # kube_resourcequota does not sanitise resource names


class FairnessQueries:
    """The week's usage for the fairness report, each expression evaluated once at the week's end.

    A figure per step is integrated over `window` with a subquery, `sum_over_time(x[window:step]) * step /
    3600` (the value at each step held for the step), or averaged with `avg_over_time`: Prometheus returns
    one number per team or one for the cluster, never raw series. A step at which a source's series are
    absent adds nothing: a gap lowers the figures, and `coverage` says by how much.

    Subquery steps fall on multiples of `step` (epoch time); Prometheus 2 includes the step at the window's
    left edge and 3 does not, so the reader (adapters/prometheus_fairness.py) passes a window 1 ms short of
    the week's: both then count the steps of (start, end], and back-to-back weeks share none.

    DRA: kube-state-metrics reports only extended resources (`nvidia.com/gpu` requests and node allocatable);
    GPUs asked through ResourceClaims and published through ResourceSlices are invisible to it, so every
    KSM-based figure here leaves DRA GPUs out. Watchtower's own gauges do count them (`watchtower_gpus`,
    `watchtower_team_gpus_used`, `watchtower_waiting_gpus`), from the claims it watches."""

    def __init__(self, queries: Queries | None = None, own: OwnQueries | None = None) -> None:
        self.q = queries or Queries()
        self.own = own or OwnQueries()

    def _hours(self, expr: str, window: float, step: float, scale: str = "") -> str:
        w, s = duration(window), duration(step)
        return f"sum_over_time(({expr})[{w}:{s}]) * {step:g} / 3600{scale}"

    def _mean(self, expr: str, window: float, step: float) -> str:
        return f"avg_over_time(({expr})[{duration(window)}:{duration(step)}])"

    # --- per step --------------------------------------------------------------------------------------

    def node_allocatable(self, resource: str) -> str:
        """Allocatable `resource` per node (KSM's sanitised name)."""
        alloc = self.q._ksm("kube_node_status_allocatable", f"resource={quoted(resource)}")
        return f"sum by (node) ({alloc})"

    def node_unavailable(self) -> str:
        """1 per node that is cordoned (spec.unschedulable) or not Ready."""
        cordoned = f"max by (node) ({self.q._ksm('kube_node_spec_unschedulable')}) == 1"
        ready = self.q._ksm("kube_node_status_condition", 'condition="Ready"', 'status="true"')
        return f"({cordoned}) or (max by (node) ({ready}) == 0)"

    def unavailable_gpus(self) -> str:
        """Allocatable GPUs on nodes that are cordoned or not Ready."""
        return f"sum ({self.node_allocatable(GPU_RESOURCE)} and on (node) ({self.node_unavailable()}))"

    def free_gpus(self) -> str:
        """GPUs free on Ready, schedulable nodes: allocatable less what running pods request, per node."""
        avail = f"({self.node_allocatable(GPU_RESOURCE)} unless on (node) ({self.node_unavailable()}))"
        used = f"sum by (node) ({self.q.pod_requests(GPU_RESOURCE)})"
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
        return f"sum ({self.q.team_idle_devices(step, threshold, kind='gpu')})"

    def team_quota_gpus(self) -> str:
        """The hard `requests.nvidia.com/gpu` of the ResourceQuotas of each team's namespaces."""
        hard = self.q.normalise_ksm(
            self.q._ksm("kube_resourcequota", f'resource="{QUOTA_GPU_RESOURCE}"', 'type="hard"')
        )
        return f"sum by (team) ({self.q._with_team(f'sum by (namespace) ({hard})')})"

    # --- over the week ---------------------------------------------------------------------------------

    def team_gpu_hours(self, window: float, step: float) -> str:
        """GPU-hours requested by each team's running pods over `window` (U)."""
        return self.q.team_gpu_hours(window, step)

    def team_idle_gpu_hours(self, window: float, step: float, threshold: float) -> str:
        """GPU-hours of each team's running pods under `threshold` % utilisation over `window`."""
        return self.q.team_idle_device_hours(window, step, threshold, kind="gpu")

    def team_cpu_core_hours(self, window: float, step: float) -> str:
        """CPU core-hours requested by each team's running pods over `window`."""
        return self._hours(self.q.team_requests("cpu"), window, step)

    def team_memory_gib_hours(self, window: float, step: float) -> str:
        """Memory GiB-hours requested by each team's running pods over `window`."""
        return self._hours(self.q.team_requests("memory"), window, step, f" / {GIB}")

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
        return self._hours(self.q.cluster_gpus_allocated(), window, step)

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
            (FAIRNESS_TEAM_GPUS, self.q.team_gpus_allocated()),
            (FAIRNESS_TEAM_IDLE_GPUS, self.q.team_idle_devices(step, threshold, kind="gpu")),
            (FAIRNESS_TEAM_CPU_CORES, self.q.team_requests("cpu")),
            (FAIRNESS_TEAM_MEMORY_BYTES, self.q.team_requests("memory")),
            (FAIRNESS_TEAM_QUOTA_GPUS, self.team_quota_gpus()),
            (FAIRNESS_CAPACITY_GPUS, alloc(GPU_RESOURCE)),
            (FAIRNESS_ALLOCATED_GPUS, self.q.cluster_gpus_allocated()),
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
        d, k = self.q.config.dcgm_selector, self.q.config.ksm_selector
        return {
            "kube-state-metrics": "kube_node_status_allocatable" + _sel(k),
            "dcgm-exporter": f"{GPU_UTIL}{_sel(d) if d else ''} or {GR_ENGINE_ACTIVE}{_sel(d) if d else ''}",
            "watchtower": self.own.series(LAST_EVALUATION),
        }

    def hours_present(self, source: str, window: float, step: float) -> str:
        """Hours of `window` with any sample of `source` (a `sources()` name) within the step ending there."""
        sel = self.sources()[source]
        s = duration(step)
        parts = " or ".join(f"max_over_time({x.strip()}[{s}])" for x in sel.split(" or "))
        return f"count_over_time((group ({parts}))[{duration(window)}:{s}]) * {step:g} / 3600"

    def catalogue(self, *, window: float, step: float, threshold: float) -> list[NamedQuery]:
        """Return every week expression, named and documented, as Queries.catalogue does."""
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
