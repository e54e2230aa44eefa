"""The replay's policy file: what would be different. Tiers, team quotas, the nodes, who may preempt whom, the
termination grace, what a preempted job loses, and Kueue-style ClusterQueues.

Validated as the configuration is (pydantic, unknown keys refused, each problem with its path). The tiers are
the configuration's own `tiers:` entries (`TierConfig`), so a policy's tiers read exactly like the running
configuration's; a key left out falls back to the configuration's defaults.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from watchtower.config.consistency import tier_problems
from watchtower.config.durations import Duration, PositiveDuration
from watchtower.config.model import Settings, TierConfig
from watchtower.domain.tiers import Tier, TierPolicy

_BETWEEN = "replay_policy"  # the error type of the checks between fields, each problem with its own path
_NAME = r"^[a-z0-9]([-a-z0-9_.]*[a-z0-9])?$"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class NodeSpec(_Section):
    name: str = Field(pattern=_NAME)
    """Node name (as `kubectl get nodes` shows it)."""
    gpus: int = Field(ge=0, le=1024)
    """GPUs the node offers."""
    cpu: float | None = Field(None, gt=0)
    """Cores allocatable to pods; unset: CPU never limits."""
    memory_gib: float | None = Field(None, gt=0)
    """GiB of memory allocatable to pods; unset: memory never limits."""


class IdenticalNodes(_Section):
    count: int = Field(ge=1, le=100_000)
    """How many identical nodes."""
    gpus: int = Field(ge=0, le=1024)
    """GPUs on each."""
    cpu: float | None = Field(None, gt=0)
    """Cores allocatable on each; unset: CPU never limits."""
    memory_gib: float | None = Field(None, gt=0)
    """GiB allocatable on each; unset: memory never limits."""


class RestartConfig(_Section):
    mode: Literal["restart", "resume"] = "restart"
    """`restart`: a preempted job starts over from its last checkpoint, the work since then is lost; `resume`:
    it carries on where it stopped (nothing lost)."""
    checkpoint_every: PositiveDuration | None = None
    """How often a job checkpoints, counted from each start; unset: never, a restart loses the whole run."""


class QuotaRetryConfig(_Section):
    initial: PositiveDuration = 1.0
    """The wait before a controller first retries a pod its team's quota refused (the Job controller's
    DefaultJobApiBackOff: 1 s)."""
    max: PositiveDuration = 60.0
    """The longest wait between two retries, each wait doubling the one before (the Job controller's
    MaxJobApiBackOff: 60 s)."""
    give_up_after: PositiveDuration | None = None
    """How long people wait while their team's quota refuses a job's pods before they delete it (one that
    never started: it leaves the queue and its quota, as the trace's `deleted` jobs did); unset: never. The
    jobs the trace says were deleted are deleted then all the same."""
    per_pod: bool = False
    """Whether the controller makes a job's pods one at a time, each charged to the quota as it is made
    (as the Job and ReplicaSet controllers and most operators do): a job holding part of its quota waits
    for the rest, and jobs each holding a part may wait on one another until one is deleted (the trace's
    `deleted`). Off: a job is charged whole, when the quota has room for all of it."""


class ClusterQueuePreemption(_Section):
    """A ClusterQueue's `preemption`, keys as Kueue names them."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, use_attribute_docstrings=True, populate_by_name=True
    )

    reclaim_within_cohort: Literal["Never", "LowerPriority", "Any"] = Field(
        "Never", alias="reclaimWithinCohort"
    )
    """Whether a job that fits within this queue's nominal quota, held back because other queues of the
    cohort borrowed it, may preempt their jobs to take it back: `Never` (Kueue's default), `LowerPriority`
    (only their jobs of a lower priority) or `Any`."""


class ClusterQueueConfig(_Section):
    name: str = Field(pattern=_NAME)
    """ClusterQueue name."""
    teams: list[str] = Field(min_length=1)
    """Teams whose jobs this queue admits."""
    nominal_gpus: int = Field(ge=0)
    """GPUs the queue is guaranteed (its `nominalQuota` of `nvidia.com/gpu`)."""
    borrowing_limit: int | None = Field(None, ge=0)
    """GPUs it may borrow beyond its nominal quota from the others' unused quota (all queues share one cohort);
    unset: no limit; 0: no borrowing."""
    preemption: ClusterQueuePreemption = ClusterQueuePreemption()
    """Kueue's `preemption` of the queue: `{reclaimWithinCohort: Never | LowerPriority | Any}`."""


def _shape(v: Any) -> str:
    return "list" if isinstance(v, list) else "one"


# Tagged by the value's shape, so a mistake is reported against the form the user wrote, not both forms.
PreemptionRule = Annotated[
    Annotated[list[str], Tag("list")] | Annotated[Literal["lower", "never"], Tag("one")],
    Discriminator(_shape),
]
Nodes = Annotated[
    Annotated[list[NodeSpec], Tag("list")] | Annotated[IdenticalNodes, Tag("one")], Discriminator(_shape)
]


class ReplayPolicy(_Section):
    """A policy to replay a trace under."""

    name: str = "policy"
    """What the results call this policy."""
    tiers: list[TierConfig] = Field(default_factory=lambda: list(Settings().tiers), min_length=1)
    """Priority tiers, as in the configuration's `tiers:`; unset: the configuration's defaults."""
    nodes: Nodes | None = None
    """The node inventory: a list of nodes, or `{count: 16, gpus: 8}` for identical ones; required when the
    trace carries none (a trace never does yet)."""
    quotas: dict[str, int] = {}
    """Team → GPUs it may hold at once (a namespace's `requests.nvidia.com/gpu` ResourceQuota); a team not
    named has no quota."""
    preemption: dict[str, PreemptionRule] = {}
    """Tier → whom its jobs may preempt: `lower` (any job of a lower priority value, as kube-scheduler does),
    `never`, or a list of tier names; a tier not named: `lower`."""
    termination_grace: Duration = 30.0
    """How long a victim holds its GPUs after it is told to stop; the preemptor starts when it ends
    (terminationGracePeriodSeconds, 30 s by default)."""
    scoring: Literal["MostAllocated", "LeastAllocated"] = "MostAllocated"
    """Which node a pod goes to among those it fits (kube-scheduler's NodeResourcesFit scoring strategy):
    `MostAllocated`, the fullest, keeping whole nodes free for large pods; `LeastAllocated` (kube-scheduler's
    default profile), the emptiest, spreading the load."""
    gangs: Literal["all", "declared"] = "all"
    """Which jobs are placed whole: `all`, every job (its pods at once, or at least its `gang_min`);
    `declared`, only the jobs whose trace gives a `gang_min` (a PodGroup, Volcano, Kueue), the others' pods
    one by one as each fits, as kube-scheduler places pods no PodGroup gangs: each pod placed holds its node's
    GPUs, doing no work, until the job's last pod is placed and the job runs."""
    restart: RestartConfig = RestartConfig()
    """What a preempted job loses."""
    quota_retry: QuotaRetryConfig | None = None
    """How a job's controller retries the pods its team's quota refused: its pods are created one at a
    time, each charged to the quota as it is made, and a refused one is tried again after a wait that
    doubles from `initial` up to `max` (reset by a pod made); the quota room freed meanwhile goes to
    whoever asks first. Unset: a job is admitted whole, the moment its quota has room."""
    cluster_queues: list[ClusterQueueConfig] = []
    """Kueue-style ClusterQueues, all in one cohort; a team in none is admitted without queue quota."""

    @field_validator("quotas")
    @classmethod
    def _quotas(cls, v: dict[str, int]) -> dict[str, int]:
        for team, gpus in v.items():
            if gpus < 0:
                raise ValueError(f"team {team!r}: a quota cannot be negative ({gpus})")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> ReplayPolicy:
        problems = tier_problems(self.model_dump(include={"tiers"})["tiers"])
        names = [t.name for t in self.tiers]
        known = ", ".join(names)
        for tier, rule in self.preemption.items():
            if tier not in names:
                problems.append((f"preemption.{tier}", f"unknown tier {tier!r} (tiers: {known})"))
            if isinstance(rule, list):
                for victim in rule:
                    if victim not in names:
                        problems.append((f"preemption.{tier}", f"unknown tier {victim!r} (tiers: {known})"))
        if isinstance(self.nodes, list):
            seen: set[str] = set()
            for n in self.nodes:
                if n.name in seen:
                    problems.append(("nodes", f"node names must be unique; repeated: {n.name}"))
                seen.add(n.name)
        queues: dict[str, str] = {}
        for i, q in enumerate(self.cluster_queues):
            for team in q.teams:
                if team in queues:
                    problems.append(
                        (f"cluster_queues[{i}].teams", f"team {team!r} is already in queue {queues[team]!r}")
                    )
                queues[team] = q.name
        if len({q.name for q in self.cluster_queues}) != len(self.cluster_queues):
            problems.append(("cluster_queues", "queue names must be unique"))
        if problems:
            text = "; ".join(f"{path}: {msg}" for path, msg in problems)
            raise PydanticCustomError(_BETWEEN, "{problems}", {"problems": text, "each": problems})
        return self

    def tier_policy(self) -> TierPolicy:
        return TierPolicy.of(
            Tier(t.name, t.min_priority, t.warn_after, t.critical_after, frozenset(t.classes))
            for t in self.tiers
        )

    def node_list(self) -> list[NodeSpec]:
        """Return every node, the identical ones named node-0, node-1, ...; raise ValueError when none is given."""
        if self.nodes is None:
            raise ValueError(
                "the policy names no nodes and the trace carries none: add `nodes: {count: 16, gpus: 8}`"
            )
        if isinstance(self.nodes, IdenticalNodes):
            n = self.nodes
            return [
                NodeSpec(name=f"node-{i}", gpus=n.gpus, cpu=n.cpu, memory_gib=n.memory_gib)
                for i in range(n.count)
            ]
        return list(self.nodes)

    def may_preempt(self, tier: str) -> PreemptionRule:
        return self.preemption.get(tier, "lower")


class PolicyError(ValueError):
    """A policy that cannot be replayed; `problems` lists each as "path: what is wrong"."""

    def __init__(self, source: str, problems: list[str]) -> None:
        self.source, self.problems = source, problems
        super().__init__(f"{source}: " + "; ".join(problems))


def policy_from_mapping(data: Mapping[str, Any], source: str = "policy") -> ReplayPolicy:
    """Return the policy `data` (a parsed YAML or JSON file) describes; raise PolicyError listing every problem."""
    try:
        return ReplayPolicy.model_validate(data)
    except ValidationError as e:
        raise PolicyError(source, [p for err in e.errors() for p in _problems(err)]) from None


def _problems(err: Any) -> list[str]:
    path = ""
    for part in err["loc"]:
        if part in ("list", "one"):  # the tag of a shape-tagged union (PreemptionRule, Nodes)
            continue
        path += f"[{part}]" if isinstance(part, int) else (f".{part}" if path else str(part))
    if err["type"] == _BETWEEN:
        return [f"{where}: {msg}" for where, msg in err["ctx"]["each"]]
    msg = err["msg"].removeprefix("Value error, ")
    return [f"{path or '(top level)'}: {msg}"]
