"""The configuration model. Each section is its own class so that each part of Watchtower reads only its own."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from watchtower.domain.alerts.rules import RuleSettings
from watchtower.domain.alerts.rules.base import RUNBOOKS_PATH
from watchtower.domain.patterns import PatternError, anchored, searched
from watchtower.domain.queue import QueuePolicy, TrainingSelector
from watchtower.domain.tiers import Tier, TierPolicy

from .alerting import AlertingConfig
from .artefacts import ArtefactsConfig
from .consistency import (
    fairness_problems,
    fleet_send_problems,
    order_problem,
    owners_problems,
    raise_problems,
    tier_problems,
)
from .durations import Duration, PositiveDuration
from .fairness import FairnessConfig
from .fleet import FleetConfig
from .leader import LeaderElectionConfig
from .owners import OwnersConfig
from .prometheus import PrometheusConfig
from .replay import ReplayConfig
from .urls import http_url


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


class TierConfig(Section):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    """Tier name, used in alerts (`tier` label), routes and the status page."""
    min_priority: int = Field(ge=-2_147_483_648, le=2_000_000_000)
    """Lowest pod priority in this tier; a pod belongs to the highest tier whose min_priority it meets."""
    classes: list[str] = []
    """PriorityClass names that belong to this tier whatever their value."""
    warn_after: PositiveDuration
    """A workload waiting this long raises a warning alert."""
    critical_after: PositiveDuration
    """A workload waiting this long raises a critical alert; not shorter than warn_after."""

    @model_validator(mode="after")
    def _warn_before_critical(self) -> TierConfig:
        if msg := order_problem(self.warn_after, self.critical_after):
            raise_problems([("", msg)])
        return self


def _default_tiers() -> list[TierConfig]:
    return [
        TierConfig(
            name="critical",
            min_priority=1_000_000,
            classes=["urgent-debug"],
            warn_after=300,
            critical_after=900,
        ),
        TierConfig(
            name="high", min_priority=900_000, classes=["online-serving"], warn_after=900, critical_after=3600
        ),
        TierConfig(
            name="medium", min_priority=500_000, classes=["experiment"], warn_after=1800, critical_after=7200
        ),
        TierConfig(
            name="low",
            min_priority=0,
            classes=["long-training", "batch"],
            warn_after=7200,
            critical_after=28800,
        ),
    ]


class TrainingConfig(Section):
    """Which pods are training workloads: GPU requesters, optionally narrowed by labels and image."""

    require_gpu: bool = True
    """Only pods requesting GPUs (`nvidia.com/gpu`, or DRA claims on a `gpu.device_classes` class) are training workloads."""
    match_labels: dict[str, str] = {}
    """Pod labels a training workload must carry, e.g. `{app.kubernetes.io/part-of: training}`."""
    image_pattern: str = ""
    """Regular expression (RE2 syntax, as Prometheus') one container image must match (searched), e.g. `paddlepaddle/paddle`; empty: any image."""

    @field_validator("image_pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            searched(v)
        except PatternError as e:
            raise ValueError(str(e)) from None
        return v


class GpuConfig(Section):
    """What counts as a GPU besides `nvidia.com/gpu`: DRA device classes (resource.k8s.io/v1)."""

    device_classes: list[str] = Field(default_factory=lambda: ["gpu.nvidia.com"])
    """DeviceClass names whose devices are GPUs: a ResourceClaim request for one asks GPUs, ResourceSlice devices of one are GPU capacity, ResourceQuota `<class>.deviceclass.resource.k8s.io/devices` is GPU quota. Add a MIG class (`mig.nvidia.com`) to count each MIG device as one GPU slice (it is left out by default: a GPU and its MIG partitions are published side by side, and counting both would count the same silicon twice)."""

    @field_validator("device_classes")
    @classmethod
    def _names(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(r"[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?", name):
                raise ValueError(f"not a DeviceClass name (a DNS subdomain): {name!r}")
        return v

    kueue_resources: list[str] = Field(default_factory=list)
    """Kueue resource names that stand for GPU DeviceClasses (the `name` of Kueue's `resources.deviceClassMappings` entries, or a DeviceClass's `extendedResourceName`): a ClusterQueue's quota in one of them is GPU quota, beside `nvidia.com/gpu`. Empty: only `nvidia.com/gpu` quota is GPUs. Kueue's configuration is not read: its ConfigMap is not a workload object."""

    @field_validator("kueue_resources")
    @classmethod
    def _resources(cls, v: list[str]) -> list[str]:
        for name in v:
            if not re.fullmatch(
                r"([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?", name
            ):
                raise ValueError(f"not a Kubernetes resource name: {name!r}")
        return v


class TeamsConfig(Section):
    label: str = "team"
    """Namespace label naming the team; a namespace without it is its own team."""


class DisplayConfig(Section):
    """Pod annotations shown next to a workload on the status page, in alerts and in the API (free text: escaped)."""

    annotations: list[str] = ["watchtower.io/note"]
    """Pod annotations shown next to a workload on the status page, in alerts and in the API."""


class QueueConfig(Section):
    quota_window: PositiveDuration = 900.0
    """A `FailedCreate ... exceeded quota` event older than this no longer marks work as quota-blocked."""
    preemption_window: PositiveDuration = 86400.0
    """How far back preemptions are listed."""
    # "preempted N times": the queue's count and WorkloadPreemptionThrash's
    thrash_window: PositiveDuration = 3600.0
    """Window of "preempted N times": the count a workload shows and the one WorkloadPreemptionThrash uses."""
    preemption_outcome_window: PositiveDuration = 600.0
    """How long a preemptor has, from its victims' eviction, to start where they were before its preemption counts as did_not_help (still waiting, or the room taken)."""
    evaluate_every: PositiveDuration = 15.0
    """How often the queue is evaluated and the alert rules run."""
    stuck_after: PositiveDuration = 600.0
    """A tier's first queued workload that fits on a node's free GPUs, CPU and memory yet has waited this long is stuck despite capacity (WorkloadStuckDespiteCapacity)."""
    estimate_window: PositiveDuration = 21600.0
    """Start estimates are read from the waits of the tier's pods scheduled within this window."""
    estimate_min_samples: int = Field(5, ge=1, le=10_000)
    """Fewest recent waits longer than a workload's own that an estimate rests on; fewer: "no estimate"."""
    expected_gates: list[str] = []
    """Scheduling gates expected to hold pods for long (a dataset prefetch, a licence), each a gate's name or an RE2 pattern matching a whole name, e.g. `example.com/prefetch` or `example\\.com/.*`: work held only by them is listed as `gated`, never alerted. Any other gate's work waits and is alerted like other waiting work; Kueue's and Volcano's gates always are."""

    @field_validator("expected_gates")
    @classmethod
    def _gates_compile(cls, v: list[str]) -> list[str]:
        for text in v:
            try:
                anchored(text)
            except PatternError as e:
                raise ValueError(f"{text!r}: {e}") from None
        return v


class ClusterConfig(Section):
    source: Literal["kube", "sim"] = "kube"
    """`kube`: a real cluster; `sim`: the built-in simulator (see `simulator`)."""
    kubeconfig: str | None = None
    """Kubeconfig file to use; unset: kubectl's order, `$KUBECONFIG`, then `~/.kube/config`, then the in-cluster service account."""
    context: str | None = None
    """Kubeconfig context; none: the file's current context."""
    page_size: int = Field(500, ge=1, le=10_000)
    """LIST page size (`limit`/`continue`)."""
    watch_timeout: PositiveDuration = 300.0
    """Server-side timeout of each WATCH request, after which it is reopened."""
    resync_every: Duration = 0.0
    """Re-list everything this often; `0s`: only when a watch answers 410 Gone."""
    # One limit for "the picture is stale": the source's `healthy`, /readyz and the status page all use it.
    stale_after: PositiveDuration = 120.0
    """The picture is stale after this long without news from the cluster: `/readyz`, the status page and the self-alert use it."""
    name: str | None = Field(None, min_length=1, max_length=253)
    """This cluster's name, carried by every alert as the label `cluster.label` and shown in notifications and on the fleet page; unset: the kubeconfig context's cluster name (outside a cluster), the in-cluster API server's host (in a pod), `demo` with the simulator. The name chosen and where it came from are logged at start."""
    label: str = Field("cluster", pattern=r"^[a-zA-Z_][a-zA-Z0-9_]*$")
    """Name of the label that tells clusters apart in a metrics engine over many clusters (each Prometheus's external label or the engine's); fleet-mode artefacts (`artefacts.fleet`) keep it."""

    @field_validator("name")
    @classmethod
    def _one_printable_line(cls, v: str | None) -> str | None:
        # The name goes into email subjects, labels and page titles: one visible line, nothing else.
        if v is not None and (v != v.strip() or not v.isprintable()):
            raise ValueError(
                f"cluster.name {v!r} must be one line of printable characters with no leading or trailing"
                " space (e.g. prod-eu-1)"
            )
        return v


class ServerConfig(Section):
    host: str = "127.0.0.1"
    """Address the HTTP server listens on."""
    port: int = Field(8080, ge=0, le=65535)
    """Port the HTTP server listens on."""
    external_url: str = "http://127.0.0.1:8080"
    """URL users reach the service at; links in alerts are built from it. Unset: `http://<server.host>:<the port it actually serves on>`, the machine's name standing for a wildcard host (0.0.0.0, ::)."""
    dashboard_url: str = ""
    """Grafana dashboard URL linked from alerts; empty: no link."""
    runbook_url: str = ""
    """Base URL of one's own runbooks (a wiki): alerts link `<runbook_url>#<alertname in lower case>`; empty: the service's own `/runbooks`."""
    api_token: SecretStr | None = None
    """Bearer token the API's write endpoints (silences) require; a secret: give it by `api_token_file` or `WATCHTOWER_SERVER__API_TOKEN`."""
    api_token_file: str | None = None
    """File holding `api_token` (e.g. a mounted Kubernetes Secret)."""
    config_reload_every: Duration = Field(5.0, ge=0)
    """How often `watchtower run` looks for a changed configuration file (a ConfigMap update swaps its symlink); a valid change is applied as far as a running service can take it (see docs/configuration.md, "Reloading"), a bad one keeps the running configuration and raises WatchtowerConfigInvalid; 0: never."""
    shutdown_deadline: PositiveDuration = 20.0
    """On SIGTERM or SIGINT, notifications being sent get this long to finish; the rest stay in the outbox for the next leader. Keep it below the pod's `terminationGracePeriodSeconds` (30 s by default)."""

    @field_validator("external_url", "dashboard_url", "runbook_url")
    @classmethod
    def _links(cls, v: str) -> str:
        # Every alert and email carries links built from these: a relative or mistyped one makes each of
        # them a dead link, found by on-call at the worst moment rather than by check-config.
        return http_url(v, "a page users open", "https://watchtower.example.com") if v else v


class StoreConfig(Section):
    path: str = "watchtower.db"
    """SQLite database of the service's state, used when `url` is empty."""
    url: str = Field("", repr=False)
    """Database of the alert state: `sqlite:///absolute/path`, `sqlite:relative/path` or a plain path (SQLite, one replica), or `postgresql://user@host:5432/db` (PostgreSQL, replicas may share it); empty: the SQLite file `path`. A password belongs in `password_file`, or give the whole URL by `url_file`."""
    url_file: str | None = None
    """File holding `url` (a mounted Kubernetes Secret), for a URL that carries its password."""
    password: SecretStr | None = None
    """Password of the PostgreSQL user; a secret: give it by `password_file` or `WATCHTOWER_STORE__PASSWORD`."""
    password_file: str | None = None
    """File holding `password` (e.g. a mounted Kubernetes Secret)."""
    claim_for: PositiveDuration = 120.0
    """PostgreSQL: how long a replica's claim on a message it is sending holds if that replica loses the database (a replica that dies releases its claims at once); longer than the slowest send's timeout."""
    start_wait: Duration = Field(90.0, ge=0)
    """PostgreSQL, `watchtower run`: how long to keep trying at start while the database cannot be reached or drops the connection (a migration cut short is rolled back whole and done again), every 1-10 s; 0: give up at once. Shorter than the liveness probe's two minutes."""
    timeout: PositiveDuration = 20.0
    """PostgreSQL: the longest a call to the store may take (each statement on the server, `statement_timeout`; a transaction left idle, `idle_in_transaction_session_timeout`; the whole call on the client, plus 2 s); past it a connection that stays open and carries nothing is cut and taken for lost (retried as any lost connection), and the server ends a session whose client went silent, releasing its locks. Also sets libpq's TCP keepalives and `tcp_user_timeout` unless the URL names them."""
    migration_timeout: PositiveDuration = 60.0
    """PostgreSQL: the same bound for the schema migration at start, which may wait for another replica's; shorter than `start_wait`, so a replica whose connection went silent mid-migration tries again in time."""

    @field_validator("url")
    @classmethod
    def _known_database(cls, v: str) -> str:
        # The message never quotes the URL: it may carry a password.
        scheme = re.match(r"^([a-zA-Z][a-zA-Z0-9+.-]+):", v)
        if scheme and scheme.group(1).lower() not in ("sqlite", "postgresql", "postgres"):
            raise ValueError(
                f"unknown database {scheme.group(1)!r}: use sqlite:///path, a plain path or postgresql://..."
            )
        return v


class SimulatorConfig(Section):
    seed: int = 7
    """Random seed: the same seed gives the same cluster story."""
    speed: float = Field(60.0, gt=0, le=100_000)
    """Simulated seconds per real second."""
    nodes: int = Field(12, ge=1, le=5000)
    """Number of GPU nodes."""
    gpus_per_node: int = Field(8, ge=1, le=64)
    """GPUs on each node."""
    teams: list[str] = ["vision", "nlp", "speech", "recsys"]
    """Teams (one namespace each) submitting work."""
    team_gpu_quota: int = Field(40, ge=0)
    """`requests.nvidia.com/gpu` ResourceQuota of each team's namespace."""
    arrivals_per_hour: float = Field(40.0, ge=0)
    """Workloads submitted per simulated hour."""
    metrics_port: int = Field(0, ge=0, le=65535)
    """Port of the simulated DCGM/kube-state-metrics `/metrics` on 127.0.0.1; 0: none."""
    cordoned_nodes: int = Field(1, ge=0)
    """Nodes under maintenance (`spec.unschedulable`)."""
    dra_nodes: int = Field(0, ge=0, le=1000)
    """Nodes whose GPUs (`gpus_per_node` each) are offered through DRA (a ResourceSlice of `gpu.nvidia.com`)
    instead of `nvidia.com/gpu`; the story's DRA jobs run there. `watchtower demo` uses 2 when this is 0."""
    warm_start: bool = True
    """Start nearly full of low-tier training, then a burst of higher tiers."""


class Settings(Section):
    """The whole configuration file."""

    cluster: ClusterConfig = ClusterConfig()
    """Where the cluster's objects come from."""
    tiers: list[TierConfig] = Field(default_factory=_default_tiers, min_length=1)
    """Priority tiers and their wait thresholds, a list of mappings (the defaults are shown in the example file)."""
    training: TrainingConfig = TrainingConfig()
    """Which pods are training workloads."""
    gpu: GpuConfig = GpuConfig()
    """Which DRA device classes are GPUs."""
    teams: TeamsConfig = TeamsConfig()
    """How a namespace's team is found."""
    display: DisplayConfig = DisplayConfig()
    """What the page, alerts and API show about a workload."""
    queue: QueueConfig = QueueConfig()
    """Windows of the queue's picture."""
    server: ServerConfig = ServerConfig()
    """The HTTP server: status page, API, `/metrics`."""
    store: StoreConfig = StoreConfig()
    """The state database."""
    simulator: SimulatorConfig = SimulatorConfig()
    """The built-in simulator, used when `cluster.source` is `sim` (`watchtower demo`)."""
    alerting: AlertingConfig = AlertingConfig()
    """Alert rules, routing, receivers, inhibition, delivery and the alert store."""
    prometheus: PrometheusConfig | None = None
    """The cluster's Prometheus, read for GPU utilisation (DCGM) and allocation (kube-state-metrics); absent: no GPU utilisation figures."""
    fairness: FairnessConfig = FairnessConfig()
    """The weekly fairness report: its history, timezone, schedule, recipients and entitlement."""
    leader_election: LeaderElectionConfig = LeaderElectionConfig()
    """Leader election among replicas on a Lease (off: one replica, which leads)."""
    replay: ReplayConfig = ReplayConfig()
    """Policy replays run by the service (`POST /api/v1/replays`, docs/replay.md)."""
    artefacts: ArtefactsConfig = ArtefactsConfig()
    """What `watchtower generate` writes beyond the tier policy: the selector of Watchtower's own series, the namespace and names of the Kubernetes-native forms."""
    fleet: FleetConfig = FleetConfig()
    """The fleet page (`/fleet`): the other clusters' Watchtowers, read from their JSON API at each visit."""
    owners: OwnersConfig = OwnersConfig()
    """Owner notices: tell a workload's owner (annotation or team contact) when it waits past its threshold, is preempted, or starts late."""

    @model_validator(mode="after")
    def _distinct(self) -> Settings:
        raise_problems(
            tier_problems(self.model_dump(include={"tiers"})["tiers"])
            + fairness_problems(
                self.fairness.model_dump(include={"smtp_receiver", "send"}),
                self.alerting.model_dump(include={"receivers"})["receivers"],
                base="fairness",
            )
            + fleet_send_problems(
                self.fleet.model_dump(include={"report"}), self.fairness.model_dump(include={"send"})
            )
            + owners_problems(
                self.owners.model_dump(include={"smtp_receiver", "contacts", "allowed_receivers"}),
                self.alerting.model_dump(include={"receivers"})["receivers"],
            )
        )
        return self

    def tier_policy(self) -> TierPolicy:
        return TierPolicy.of(
            Tier(t.name, t.min_priority, t.warn_after, t.critical_after, frozenset(t.classes))
            for t in self.tiers
        )

    def queue_policy(self) -> QueuePolicy:
        return QueuePolicy(
            tiers=self.tier_policy(),
            selector=TrainingSelector(
                require_gpu=self.training.require_gpu,
                match_labels=dict(self.training.match_labels),
                image_pattern=self.training.image_pattern,
            ),
            quota_window=self.queue.quota_window,
            preemption_window=self.queue.preemption_window,
            thrash_window=self.queue.thrash_window,
            preemption_outcome_window=self.queue.preemption_outcome_window,
            expected_gates=tuple(anchored(t) for t in self.queue.expected_gates),
        )

    def rule_settings(self) -> RuleSettings:
        """Return what the alert rules read: thresholds from `alerting.rules`, links from `server`."""
        r = self.alerting.rules
        return RuleSettings(
            thrash_count=r.thrash_count,
            gang_stall_after=r.gang_stall_after,
            unreachable_after=r.unreachable_after,
            inversion_tiers=frozenset(r.inversion_tiers),
            status_url=self.server.external_url,
            dashboard_url=self.server.dashboard_url,
            disabled=frozenset(r.disabled),
            runbook_url=self.server.runbook_url or self.server.external_url.rstrip("/") + RUNBOOKS_PATH,
        )
