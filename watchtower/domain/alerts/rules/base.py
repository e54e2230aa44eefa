"""What every rule receives and how its alerts are labelled and annotated."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import quote as _quote

from watchtower.domain.estimate import TierWaits
from watchtower.domain.gpu_usage import GpuAlert
from watchtower.domain.queue import QueueSnapshot, WorkloadStatus
from watchtower.domain.stuck import StuckHead
from watchtower.domain.tiers import TierPolicy
from watchtower.domain.timefmt import format_duration
from watchtower.domain.workloads import WorkloadKey

from ..model import AlertCandidate

# Where the runbook sections are: alerts link to RUNBOOK_URL#<alertname in lower case>. The service links
# its own copy, served at RUNBOOKS_PATH, unless `server.runbook_url` names another (`Settings.rule_settings`);
# the generated Prometheus rules, which no service serves, link the file in the repository.
RUNBOOK_URL = "docs/runbooks.md"
RUNBOOKS_PATH = "/runbooks"


@dataclass(frozen=True, slots=True)
class RuleSettings:
    """The rules' thresholds and links; every value comes from the configuration (`Settings.rule_settings`)."""

    thrash_count: int
    gang_stall_after: float
    unreachable_after: float
    inversion_tiers: frozenset[str]
    status_url: str  # the service's own URL, e.g. https://watchtower.example; "" for no link
    dashboard_url: str  # a Grafana dashboard; `var-namespace` and `var-workload` are appended; "" for none
    disabled: frozenset[str]  # alertnames switched off
    runbook_url: str = RUNBOOK_URL


@dataclass(frozen=True, slots=True)
class GpuHolder:
    """GPUs one workload's bound pods hold on one node (plain data taken from the cluster state)."""

    workload: WorkloadKey
    node: str
    gpus: int
    priority: int
    priority_class: str
    tier: str
    preemption_policy: str = "PreemptLowerPriority"


@dataclass(frozen=True, slots=True)
class HolderChanges:
    """How one tick's holders differ from those the same index handed on before (`HolderIndex.below`):
    generation `since` to `upto`, and each workload whose records changed with all its records now (empty:
    it holds none any more). A consumer that kept generation `since` applies this and reads nothing else."""

    since: int
    upto: int
    records: Mapping[WorkloadKey, tuple[GpuHolder, ...]]


@dataclass(frozen=True, slots=True)
class WatchHealth:
    """How the Kubernetes watch is doing: `unhealthy_since` is None while it is fine."""

    unhealthy_since: float | None = None
    detail: str = ""


@dataclass(frozen=True, slots=True)
class RuleInput:
    snapshot: QueueSnapshot
    now: float
    tiers: TierPolicy
    settings: RuleSettings
    holders: Sequence[GpuHolder] = ()
    # How `holders` differ from the index's previous ones (None: not known, e.g. it started over).
    holder_changes: HolderChanges | None = None
    health: WatchHealth | None = None
    gone_receivers: Mapping[str, str] = field(default_factory=dict)  # integration → why it was disabled
    # GPU findings from Prometheus (services.gpu_usage.GpuUsageService.alerts()): held while figures are stale
    gpu_alerts: Sequence[GpuAlert] = ()
    stuck: Sequence[StuckHead] = ()  # the Tick's heads that fit yet do not start
    waits: TierWaits | None = None  # the Tick's recent time to schedule, for start estimates
    # "yaml.path: what is wrong" of a configuration file that changed and could not be applied
    config_problems: Sequence[str] = ()


Rule = Callable[[RuleInput], list[AlertCandidate]]


def human(seconds: float) -> str:
    """Return a duration as alert text says it: 45s, 12m, 2h05m, 3d4h."""
    return format_duration(seconds, spoken=True)


def workload_labels(w: WorkloadStatus, alertname: str, severity: str) -> dict[str, str]:
    return {
        "alertname": alertname,
        "severity": severity,
        "namespace": w.namespace,
        "team": w.team,
        "workload": w.name,
        "kind": w.kind,
        "tier": w.tier,
        "priority_class": w.priority_class,
        "gpus": str(w.gpus_requested),
    }


_URL_SAFE = re.compile(r"[A-Za-z0-9_.~-]*")


@lru_cache(maxsize=65536)
def _q(text: str) -> str:
    # urllib's quote costs ~0.1 ms a call; an alert storm quotes the same names again on every tick,
    # and Kubernetes names (DNS labels) need no quoting at all.
    if _URL_SAFE.fullmatch(text):
        return text
    return _quote(text, safe="")


def runbook_link(base: str, alertname: str) -> str:
    """Return the runbook section of `alertname` under `base`: the service's alerts and the generated
    Prometheus rules point into the same file this way."""
    return f"{base}#{alertname.lower()}"


def workload_path(namespace: str, name: str, kind: str = "") -> str:
    """Return the path of a workload's own page, `/workloads/{namespace}/{name}?kind={kind}`, each part
    quoted; the kind makes the link unambiguous when two kinds share a name."""
    path = f"/workloads/{_q(namespace)}/{_q(name)}"
    return f"{path}?kind={_q(kind)}" if kind else path


def links(settings: RuleSettings, alertname: str, key: WorkloadKey | None) -> dict[str, str]:
    """Return an alert's link annotations: its runbook section, the page of its workload (or the status
    page when it is about no workload) and the dashboard, each when configured."""
    out = {"runbook_url": runbook_link(settings.runbook_url, alertname)}
    if settings.status_url:
        base = settings.status_url.rstrip("/")
        out["status_url"] = (
            base + workload_path(key.namespace, key.name, key.kind) if key is not None else f"{base}/"
        )
    if settings.dashboard_url:
        sep = "&" if "?" in settings.dashboard_url else "?"
        extra = (
            f"{sep}var-namespace={_q(key.namespace)}&var-workload={_q(key.name)}" if key is not None else ""
        )
        out["dashboard_url"] = settings.dashboard_url + extra
    return out


def queue_context(w: WorkloadStatus) -> str:
    k = w.facts.kueue
    if w.facts.position_queue == "kueue" and k is not None:
        where = f"ClusterQueue {k.cluster_queue}" if k.cluster_queue else "its ClusterQueue"
        place = (
            f"#{k.position + 1} in {where}" if k.position is not None else f"its place in {where} not known"
        )
        return f"Held by Kueue, not yet in the scheduler's queue: {place}."
    if w.ahead_higher_tier:
        return (
            f"{w.ahead_higher_tier} higher-tier workload(s) are ahead of it in the queue ({w.ahead} in all)."
        )
    if w.ahead:
        return f"{w.ahead} workload(s) of its own tier are ahead of it; none of a higher tier."
    return "Nothing is ahead of it in the queue."
