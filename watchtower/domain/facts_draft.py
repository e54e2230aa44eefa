"""A workload's facts while they are worked out: the draft the queue forms' steps refine, what they read,
and what a form registers to take part (`FactsStep`, as its `QueueForm.facts`).

queue_facts.py runs the steps of the registered forms (`registry.FORMS`) in the order of their `stage`.
Each step begins a pass over the workload (`FactsStep.begin`, None: the form has no part in it); a pass
may hold the workload with no pod tracked (`holds`: a quota refusal, a PaddleJob, a Kueue Workload),
choose its priority (`priority`) and refine what the passes of lower stages worked out (`refine`).
The pods' step is stage 0: it sorts the tracked pods and gives the state, wait and words they say.

The steps read the cluster state through `FactsState`, never state.py itself: state.py reads the
registry, which reads each slice's step, which reads this.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from watchtower.domain.forms.dra.records import GpuClaim
from watchtower.domain.forms.dra.tables import DraTables
from watchtower.domain.forms.gangs.records import SOURCE_PODS
from watchtower.domain.forms.gangs.tables import GangTables
from watchtower.domain.forms.kueue.records import KueueFacts, KueueWorkload
from watchtower.domain.forms.kueue.tables import KueueTables
from watchtower.domain.forms.quota.refusals import QuotaRefusal
from watchtower.domain.messages.scheduler import PreemptionVerdict, SchedulingDiagnosis
from watchtower.domain.never import NodeInventory
from watchtower.domain.preemption_ledger import PreemptionLedger
from watchtower.domain.queue_values import QueuePolicy, WorkloadState
from watchtower.domain.records import Pod, PriorityClass
from watchtower.domain.state_controllers import ControllerPart
from watchtower.domain.workloads import WorkloadKey


class PartsByName(Protocol):
    """The state's form parts by form name (forms/parts.py `FormParts`): where a form's step finds its own
    part, with the tables it keeps, without a member of its own here."""

    @property
    def by_name(self) -> Mapping[str, object]: ...


class FactsState(Protocol):
    """The parts of the cluster state the steps read (`ClusterState` has each; mypy checks it where
    queue_facts.py passes one)."""

    @property
    def priority_classes(self) -> Mapping[str, PriorityClass]: ...
    @property
    def control(self) -> ControllerPart: ...
    @property
    def gangs(self) -> GangTables: ...
    @property
    def dra(self) -> DraTables: ...
    @property
    def kueue(self) -> KueueTables: ...
    @property
    def by_workload(self) -> Mapping[WorkloadKey, set[str]]: ...
    @property
    def forms(self) -> PartsByName: ...
    @property
    def ledger(self) -> PreemptionLedger: ...
    def kueue_priority(self, w: KueueWorkload) -> tuple[int, str]: ...
    def inventory(self) -> NodeInventory: ...


# Why a step left something out: none of them is a malformed object (an object the decoder could not read,
# counted apart), so they are counted by their own reason, and page nobody as unreadable objects would.
NOT_REAL_WORK = "not_real_work"  # a Kueue group Workload no job owns, whose pods do not exist: not listed
NEVER_UNDECIDED = "never_undecided"  # whether it can never start could not be read: left unsaid, still listed
LEFT_OUT_REASONS = (NOT_REAL_WORK, NEVER_UNDECIDED)


class FactsContext(NamedTuple):
    """What every step of one evaluation reads and none changes (a tuple: one is made per workload)."""

    state: FactsState
    policy: QueuePolicy
    diagnose: Callable[[str], SchedulingDiagnosis]
    now: float
    # Hears of what a step leaves out (workload, kind, what in words, one of LEFT_OUT_REASONS): the evaluator
    # hands each out once, to be counted and logged where logging is.
    odd: Callable[[WorkloadKey, str, str, str], None] | None = None


@dataclass(slots=True)
class FactsDraft:
    """One workload's facts as the steps work them out; the fields named as WorkloadFacts' are its own.

    `pods` are all its pods, finished ones included; `tracked` those the policy tracks, not finished;
    `refusal` its quota refusal while it still blocks. `queued`, `gated`, `bound` and `oldest_queued`
    are the pods' step's (stage 0)."""

    key: WorkloadKey
    pods: list[Pod]
    tracked: list[Pod]
    refusal: QuotaRefusal | None
    pods_existing: int = 0  # its pods not finished, tracked or not
    queued: list[Pod] = field(default_factory=list)
    gated: list[Pod] = field(default_factory=list)
    bound: list[Pod] = field(default_factory=list)
    oldest_queued: Pod | None = None
    priority: int = 0
    priority_class: str = ""
    state: WorkloadState = WorkloadState.RUNNING
    since: float | None = None
    gpus_requested: int = 0
    gpus_per_pod: int = 0
    diagnosis: SchedulingDiagnosis | None = None
    scheduling_reason: str = ""
    preemption: PreemptionVerdict = PreemptionVerdict.UNKNOWN
    why: str = ""
    nominated_node: str = ""
    oldest_pod: str = ""
    annotations: Mapping[str, str] = field(default_factory=dict)
    notify: str = ""  # the owner-notice annotation of its oldest pod that carries one
    source: str = SOURCE_PODS
    pods_expected: int = 0
    group: str = ""
    queue: str = ""
    gpu_claims: dict[str, GpuClaim] = field(default_factory=dict)  # by claim name
    kueue: KueueFacts | None = None
    form_facts: dict[str, object] = field(default_factory=dict)  # by form name: WorkloadFacts.form_facts


class FactsPass:
    """A form's part in one workload's facts, begun by its step for that workload; by default it holds
    nothing and changes nothing."""

    __slots__ = ()

    def holds(self) -> bool:
        """Return True when the form makes the workload wait even with no pod tracked."""
        return False

    def priority(self, ctx: FactsContext, draft: FactsDraft) -> None:
        """Set the draft's priority when the form decides it (a later stage has the last word)."""

    def refine(self, ctx: FactsContext, draft: FactsDraft) -> None:
        """Refine the draft after the passes of lower stages."""


@dataclass(frozen=True, slots=True)
class PodLess:
    """How a form makes workloads wait with no pod of theirs queued (a PaddleJob before its pods, a job
    Kueue keeps suspended): the evaluator lists them beside the workloads of waiting pods."""

    # Every workload it holds so, waiting or running: listed when running work is asked for too.
    held: Callable[[FactsState], Collection[WorkloadKey]]
    # Whether one of them may wait now with no pod queued: a first evaluation lists those, and a later one
    # asks the same of each changed workload, so that both list alike.
    may_wait: Callable[[FactsState, WorkloadKey], bool]

    def waiting(self, state: FactsState) -> set[WorkloadKey]:
        """Return the workloads it holds that may wait now with no pod queued."""
        return {k for k in self.held(state) if self.may_wait(state, k)}


@dataclass(frozen=True, slots=True)
class FactsStep:
    """What a form registers (`QueueForm.facts`): where it runs among the others (lower `stage` first;
    ties in the registry's order), how it begins a pass over a workload (None: no part in it), and, for a
    form that holds work with no pod, which workloads those are (`pod_less`)."""

    stage: int
    begin: Callable[[FactsContext, FactsDraft], FactsPass | None]
    pod_less: PodLess | None = None
