"""The whole `watchtower analyze --format json` document (docs/json.md): the queue's workloads and
preemptions as the API serves them, plus the cluster-wide parts only analyze prints.

No route serves it; it is declared here so that one set of models describes docs/json.md, and the tests
check analyze's output against it as they check the API's. `Analysis` is composed as `Queue` is: its common keys
(`CommonAnalysis`), with each registered form's sections (its `queue_shape`) after `quota`."""

from __future__ import annotations

from functools import cache
from typing import Literal

from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm

from .common import Body, Number, Time
from .preemption import Preemption
from .shapes import compose, section_fields
from .workload import CommonWorkload, workload_model


class Disruption(Body):
    """A pod taken away for a reason that is not preemption."""

    uid: str
    """the pod's uid"""
    namespace: str
    """the pod's namespace"""
    name: str
    """the pod's name"""
    reason: str
    """`EvictionByEvictionAPI`, `DeletionByTaintManager`, `DeletionByPodGC`, `TerminationByKubelet`, or the
    pod's `status.reason` `Evicted` (node pressure) or `Preempting` (kubelet admitting a critical pod)"""
    at: Time | None
    """the condition's time (else the deletion time)"""
    node: str | None
    """where it ran"""
    gpus: int
    """its GPUs"""


class Fragmentation(Body):
    """A waiting workload whose pod fits in the cluster's free GPUs in total but on no single node."""

    namespace: str
    """the waiting workload's namespace"""
    name: str
    """its name"""
    kind: str
    """its kind"""
    gpus_requested: int
    """per pod: what must fit on one node"""
    free_gpus_total: int
    """free GPUs on all schedulable nodes"""
    largest_free_on_one_node: int
    """the most free GPUs any one node has"""


class PartialGang(Body):
    """A gang (PaddleJob, Volcano job) with some pods bound and some waiting."""

    namespace: str
    """the gang's namespace"""
    name: str
    """its name"""
    kind: str
    """`PaddleJob` or `VolcanoJob`"""
    gpus_held: int
    """GPUs its bound pods hold while it waits"""
    pods_running: int
    """bound pods"""
    pods_pending: int
    """queued pods"""
    wait_seconds: Number
    """how long it has waited"""


class NodeCapacity(Body):
    name: str
    """the node"""
    allocatable: int
    """its allocatable GPUs"""
    used: int
    """GPUs of its non-finished bound pods"""
    free: int
    """0 on a cordoned node"""
    schedulable: bool
    """not cordoned"""
    dra: int
    """of `allocatable`, the GPUs its ResourceSlices publish (DRA devices of a `gpu.device_classes` class)"""


class Capacity(Body):
    gpus_allocatable: int
    """GPUs of all nodes"""
    gpus_used: int
    """by non-finished bound pods, terminating ones included"""
    gpus_free: int
    """cordoned nodes offer none"""
    largest_free_on_one_node: int
    """the most free GPUs any one node has"""
    gpus_dra: int
    """of `gpus_allocatable`, the GPUs ResourceSlices publish (DRA)"""
    nodes: list[NodeCapacity]
    """every node with GPUs"""


class NamespaceQuota(Body):
    """A namespace's GPU quota (`requests.nvidia.com/gpu` of its ResourceQuota's `status`)."""

    namespace: str
    """the quota's namespace"""
    name: str
    """the ResourceQuota"""
    team: str
    """the namespace's team"""
    gpus_hard: int
    """its GPU limit"""
    gpus_used: int | None
    """GPUs in use, as its status says"""


class Distribution(Body):
    """Nearest-rank quantiles of the pods' durations."""

    count: int
    """samples: pods that got that far"""
    p50: Number | None
    """median, seconds (null without samples)"""
    p95: Number | None
    """95th percentile, seconds"""
    max: Number | None
    """longest, seconds"""
    censored: int
    """pods still waiting: their wait so far is a lower bound, not a sample"""


class TierLatency(Body):
    tier: str
    """the tier"""
    time_to_schedule_seconds: Distribution
    """creation → `PodScheduled=True`"""
    startup_seconds: Distribution
    """scheduled → first container start (image pulls)"""


class RuleAlert(Body):
    """An alert that would be firing at `at` (ignoring `for`, silences and inhibition)."""

    rule: str
    """the alert's name"""
    severity: str
    """its `severity` label (`warning`, `critical`)"""
    summary: str
    """one line for people"""
    labels: dict[str, str]
    """its labels"""


class SkippedObject(Body):
    """A malformed object, once per object."""

    kind: str
    """the object's kind (`Unknown` when unreadable)"""
    uid: str | None
    """null when unreadable"""
    name: str | None
    """null when unreadable"""
    error: str
    """why it was skipped"""


class CommonAnalysis(Body):
    """`watchtower analyze --format json` (schema_version 1)."""

    schema_version: int
    """`1`"""
    at: Time | None
    """the evaluation time: `--at`, else the newest time the dump holds"""
    at_source: Literal["option", "dump", "now"]
    """where `at` came from: `option` (`--at`), `dump` (its newest time) or `now` (a dump holding no time)"""
    workloads: list[CommonWorkload]
    """every tracked workload, running ones included, ordered by tier (highest first), waiting before not
    waiting, longest wait first"""
    preemptions: list[Preemption]
    """preemptions in the last `queue.preemption_window` (24 h), newest first"""
    disruptions: list[Disruption]
    """pods taken away for other reasons, newest first"""
    fragmentation: list[Fragmentation]
    """waiting workloads whose pod fits in the cluster's free GPUs in total but on no single node"""
    partial_gangs: list[PartialGang]
    """gangs (PaddleJob, Volcano job) with some pods bound and some waiting"""
    capacity: Capacity
    """the cluster's GPUs: allocatable, used, free, and per node"""
    gated_pods: int
    """pods held by `schedulingGates`: not queued yet, never alerted on as waiting"""
    quota: list[NamespaceQuota]
    """namespace GPU quotas"""
    latency: list[TierLatency]
    """per tier: time to schedule and start-up"""
    alerts: list[RuleAlert]
    """the alerts that would be firing at `at`"""
    skipped: list[SkippedObject]
    """malformed objects, once per object"""
    skipped_total: dict[str, int]
    """kind → number of malformed items skipped"""
    ignored_kinds: dict[str, int]
    """kind → number of items of kinds analyze does not read (e.g. `ConfigMap`)"""


@cache
def analysis_model(forms: tuple[QueueForm, ...]) -> type[Body]:
    """Return the `Analysis` model of these forms: its common keys, the forms' sections after `quota`."""
    return compose(
        "Analysis",
        CommonAnalysis,
        section_fields(forms),
        after="quota",
        swap=(CommonWorkload, workload_model(forms)),
    )


Analysis = analysis_model(registry.FORMS)
