"""A workload in the queue, as `queue_json.workload_dict` presents it (docs/json.md, "workloads").

`Workload` is composed: the common keys (`CommonWorkload`), then each registered form's (its `workload_shape`,
domain/forms/<form>/shapes.py) in the registry's order, then `quota`, as services/queue_json.py places them.
"""

from __future__ import annotations

from functools import cache
from typing import Literal

from watchtower.domain.forms import registry
from watchtower.domain.forms.form import QueueForm
from watchtower.domain.messages.scheduler import PreemptionVerdict
from watchtower.domain.queue import WorkloadState

from .common import Body, Number, Time
from .shapes import compose, workload_fields


class Reason(Body):
    """One clause of the scheduler's message, parsed."""

    reason: str
    """normalised: `Insufficient nvidia.com/gpu`, `Insufficient cpu`, `untolerated taint` (every taint wording
    of every version), `node(s) didn't match Pod's node affinity/selector`, `node(s) were unschedulable`,
    `Too many pods`, `no nodes`, ..., or `other` for text that is not in the grammar or was cut off"""
    nodes: int
    """how many nodes gave it (0 if unknown)"""
    text: str
    """the scheduler's words verbatim"""


class WorkloadQuota(Body):
    """The ResourceQuota refusing the controller's pod creation (its `FailedCreate ... exceeded quota` event)."""

    name: str
    """the ResourceQuota"""
    requested: dict[str, str]
    """resource → quantity the refused pod asked for"""
    used: dict[str, str]
    """resource → quantity in use, as the event says"""
    limited: dict[str, str]
    """resource → the quota's limit, as the event says"""
    refusals: int
    """how many refusals were seen"""
    last_refused: Time | None
    """the latest refusal"""


class EstimateAccuracy(Body):
    """How good its tier's start estimates were over the last 7 days: each wait's first estimate checked
    against the start that followed (docs/reading-the-cluster.md, "How good the estimates are")."""

    checked: int
    """estimates of its tier whose work started in the last 7 days"""
    within: int
    """of those, within ±50 % (|estimated - actual start| at most half the actual wait from the estimate)"""
    share_within: Number
    """`within` / `checked`"""
    median_error: Number
    """the median |relative error| (0.25: a quarter of the wait)"""
    verdict: Literal["fair", "poor"]
    """`poor`: fewer than 10 checked or fewer than half within ±50 %; then no number is given in `text`"""
    text: str
    """the figure in words: "estimates for this tier were within ±50 % for 7 in 10 workloads last week" """


class StartEstimate(Body):
    """When a waiting workload may start: an estimate from its tier's recent time to schedule."""

    start_in_seconds: Number | None
    """seconds from `at` until it starts, by the estimate; null: no estimate (see `basis`)"""
    starts_at: Time | None
    """`at` plus `start_in_seconds`"""
    samples: int
    """recent waits of its tier longer than its own wait so far, which the estimate rests on"""
    basis: str
    """what the estimate rests on ("from 37 medium pods scheduled in the last 6 h: median 12m"), or why
    there is none"""
    text: str
    """the estimate in words, labelled as one: "estimate: starts in about 8m (...)" or "no estimate: ...";
    with the tier's record when its estimates were checked: "estimate: starts in 20m-45m (...); estimates
    for this tier were within ±50 % for 7 in 10 workloads last week", and "no estimate: estimates for this
    tier were poor last week: ..." instead of a number when they were poor"""
    range_seconds: list[Number] | None
    """[low, high] seconds from `at`: the estimate times the 20th and 80th percentiles of actual/estimated
    waits of its tier's checked estimates; null without a number, without checked estimates, or when they
    were poor"""
    accuracy: EstimateAccuracy | None
    """how good its tier's estimates were over the last 7 days; null while none of its tier was checked"""


class NeverStarts(Body):
    """Why it can never start as the cluster is configured: waiting longer will not help."""

    reason: Literal[
        "node_resources", "node_selector", "gang", "quota_hard", "kueue_max_quota", "kueue_no_matching_flavor"
    ]
    """what makes it never: `node_resources` (one pod asks more GPUs, CPU or memory than any schedulable
    node's allocatable), `node_selector` (no schedulable node has the labels its pods select), `gang` (its
    gang's minimum of pods cannot be placed on the schedulable nodes at once, even empty), `quota_hard` (one
    pod asks more than a ResourceQuota's `hard`), `kueue_max_quota` (more than its ClusterQueue can ever give,
    nominal and borrowing together), `kueue_no_matching_flavor` (no ResourceFlavor of its ClusterQueue fits)"""
    asks: str
    """what it asks, in its own numbers: `32 GPUs`, `16 GPUs per pod`"""
    limit: str
    """the most the cluster gives: `ClusterQueue research-cq gives at most 16`"""
    source: str
    """what says so: `nodes`, `ResourceQuota <name>`, `ClusterQueue <name>`"""
    text: str
    """the same in words: `can never start as configured: asks 32 GPUs, ClusterQueue research-cq gives at
    most 16`"""


class StuckDespiteCapacity(Body):
    """Its tier's head fits on a node's free GPUs, CPU and memory, yet has waited past `queue.stuck_after`."""

    pod: str | None
    """the pod looked at: its oldest queued pod; null for a Kueue-held workload (no pods)"""
    node: str | None
    """a node it fits on (an untainted one when there is any); null for a Kueue-held workload"""
    node_taints: list[str]
    """that node's NoSchedule/NoExecute taints (`key=value:Effect`): tolerations are not read"""
    scheduler_name: str
    """the pod's `spec.schedulerName`"""
    scheduler_said: str | None
    """its `PodScheduled=False` message; null: the scheduler has said nothing"""
    likely_causes: list[str]
    """when it said nothing: a schedulerName no bound pod names, an incomplete gang, a scheduler not binding;
    for Kueue what holds a Workload whose quota is free"""
    cluster_queue: str | None
    """Kueue: the ClusterQueue whose free nominal quota (with its cohort's) would admit it"""
    quota_free_gpus: int | None
    """Kueue: those free GPUs"""
    why: str
    """the same in plain words"""


class CommonWorkload(Body):
    """The pods of one controller: PaddleJob, Volcano job, batch Job, any other controller, else the bare pod."""

    namespace: str
    """the workload's namespace"""
    name: str
    """the controller's name (the pod's name for `kind` `Pod`)"""
    kind: str
    """`PaddleJob`, `VolcanoJob`, `Job`, `ReplicaSet`, ..., or `Pod`"""
    team: str
    """the namespace's `team` label (configurable), else the namespace"""
    tier: str
    """from the highest-priority pod: a PriorityClass listed under a tier's `classes` wins, else the highest
    tier whose `min_priority` it meets, else the lowest tier"""
    priority: int
    """`spec.priority` of that pod, as admission filled it in"""
    priority_class: str
    """`spec.priorityClassName` of that pod"""
    state: WorkloadState
    """`pending` (no pod bound, some queued), `partial` (some bound, some queued), `running` (nothing queued),
    `gated` (only pods behind gates `queue.expected_gates` names wait: never alerted; work behind other gates
    is `pending` or `partial`), `quota_blocked` (pod creation refused by a ResourceQuota)"""
    since: Time | None
    """when the current wait began: creation of the oldest queued pod (none queued: of the oldest gated one);
    for `quota_blocked` the first refusal"""
    wait_seconds: Number
    """`at − since` (0 for `running`)"""
    warn_after_seconds: Number
    """the tier's warning threshold"""
    critical_after_seconds: Number
    """the tier's critical threshold"""
    severity: Literal["warning", "critical"] | None
    """set when a waiting workload (`pending`, `partial`, `quota_blocked`) passed a threshold; always null for
    `gated` and `running`"""
    gpus_requested: int
    """GPUs of all its non-finished pods (plus the refused pod's request when `quota_blocked`)"""
    gpus_held: int
    """GPUs of its bound pods (a partial gang holds these while it waits)"""
    gpus_per_pod: int
    """the largest request of a queued pod: what must fit on one node"""
    pods_pending: int
    """queued pods"""
    pods_running: int
    """bound pods, terminating ones included"""
    pods_gated: int
    """pods held by `schedulingGates`"""
    gang: bool
    """true for PaddleJob and VolcanoJob: it waits until all its pods are bound"""
    scheduling_reason: str | None
    """the oldest queued pod's `PodScheduled` reason: `Unschedulable`, `SchedulerError`, `SchedulingGated`, or
    `FailedCreate` for quota"""
    reasons: list[Reason]
    """the scheduler's message parsed"""
    nodes_total: int | None
    """the N of `0/N nodes are available`"""
    message: str | None
    """the raw `PodScheduled=False` message"""
    message_truncated: bool
    """the message was cut at 1024 bytes (` ...`)"""
    preemption: PreemptionVerdict
    """can preemption help: `possible` (a node is nominated, or victims are terminating), `no_victims`,
    `not_helpful`, `policy_never` (the pod's `preemptionPolicy` is `Never`), `unknown`"""
    preemption_node: str | None
    """the node the scheduler's preemption dry run would place it on (1.36+: `found a potential placement for
    pod on node <n>`)"""
    preemption_victims: int | None
    """how many pods that preemption would evict (`preempting <k> victims`)"""
    gang_min: int | None
    """when the message is about its gang: the gang's minimum (`minCount`, Volcano's `minAvailable`)"""
    gang_placed: int | None
    """of those, how many the scheduler could place (1.36: scheduled; Volcano: the minimum less those short)"""
    why: str
    """the same in plain words, for people; not for parsing"""
    nominated_node: str | None
    """`status.nominatedNodeName` of the oldest queued pod (it alone is not a preemption)"""
    oldest_pending_pod: str | None
    """that pod's name"""
    ahead: int
    """workloads whose pods the scheduler queues (`pending`/`partial`) that it considers first (higher
    priority, then older); a Kueue-held job has no pods, so it is ahead of no one and has 0"""
    ahead_higher_tier: int
    """of those, how many are in a higher tier"""
    position_in_tier: int | None
    """1-based place in the scheduler's queue among its tier's queued workloads (`ahead` − `ahead_higher_tier`
    + 1); null when its pods are not in the scheduler's queue (`quota_blocked`, `gated`, `running`, held by
    Kueue, pods not made yet) or outside a tick"""
    position_queue: Literal["scheduler", "kueue"] | None
    """which queue its place is in: `scheduler` (`ahead`, `position_in_tier`), `kueue` (held by Kueue, not
    admitted: its place is `kueue.position`, in its ClusterQueue); null when it has a place in neither"""
    start_estimate: StartEstimate | None
    """an estimate of when it starts; null for `running` or outside a tick; for work that can never start,
    no estimate: its `text` says "never: ..." """
    never: NeverStarts | None
    """set when it can never start as the cluster is configured (its numbers and what says so); null when
    it may start once room frees"""
    stuck_despite_capacity: StuckDespiteCapacity | None
    """set when it heads its tier, fits on a node's free GPUs, CPU and memory, yet waited past
    `queue.stuck_after` (10 min)"""
    preemptions_recent: int
    """times its pods were preempted within `queue.thrash_window` (1 h); a gang preempted at once counts once"""
    annotations: dict[str, str]
    """the configured display annotations of its oldest pod (free text, at most 2 KiB each)"""
    source: str
    """what the wait was read from: `pods`, `quota`, `paddlejob`, `podgroup` (upstream gang), `volcano-podgroup`
    or `kueue` (suspended by Kueue, not admitted: no pods)"""
    pods_expected: int
    """the pods it needs: its gang's minimum or its spec's total (0 = unknown)"""
    pods_existing: int
    """of its pods, those that exist (not finished): `3` of `pods_expected` 4 is an incomplete gang"""
    quota: WorkloadQuota | None
    """for `quota_blocked`: the refusing quota"""


@cache
def workload_model(forms: tuple[QueueForm, ...]) -> type[Body]:
    """Return the `Workload` model of these forms: the common keys to `pods_existing`, each form's keys, then
    `quota` (one model per registry, so that every document names the same `Workload`)."""
    return compose("Workload", CommonWorkload, workload_fields(forms), after="pods_existing")


Workload = workload_model(registry.FORMS)
