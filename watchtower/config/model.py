"""The configuration model. Each section is its own class so that each part of Watchtower reads only its own."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from watchtower.domain.alerts.rules import RuleSettings
from watchtower.domain.alerts.rules.base import RUNBOOKS_PATH
from watchtower.domain.queue import QueuePolicy, TrainingSelector
from watchtower.domain.tiers import Tier, TierPolicy

from .alerting import AlertingConfig
from .durations import Duration
from .prometheus import PrometheusConfig


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TierConfig(Section):
    name: str = Field(pattern=r"^[a-z][a-z0-9_-]*$")
    min_priority: int = Field(ge=-2_147_483_648, le=2_000_000_000)
    classes: list[str] = []
    warn_after: Duration
    critical_after: Duration

    @model_validator(mode="after")
    def _warn_before_critical(self) -> TierConfig:
        if self.critical_after < self.warn_after:
            raise ValueError(
                f"critical_after ({self.critical_after:g}s) is shorter than warn_after ({self.warn_after:g}s)"
            )
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
    match_labels: dict[str, str] = {}
    image_pattern: str = ""

    @field_validator("image_pattern")
    @classmethod
    def _compiles(cls, v: str) -> str:
        try:
            re.compile(v)
        except re.error as e:
            raise ValueError(f"not a regular expression: {e}") from e
        return v


class TeamsConfig(Section):
    label: str = "team"


class DisplayConfig(Section):
    """Pod annotations shown next to a workload on the status page, in alerts and in the API (free text: escaped)."""

    annotations: list[str] = ["watchtower.io/note"]


class QueueConfig(Section):
    quota_window: Duration = 900.0  # a quota refusal older than this no longer blocks
    preemption_window: Duration = 86400.0  # preemptions listed
    thrash_window: Duration = 3600.0  # "preempted N times": the queue's count and WorkloadPreemptionThrash's
    evaluate_every: Duration = 15.0


class ClusterConfig(Section):
    source: Literal["kube", "sim"] = "kube"
    kubeconfig: str | None = None  # None: in-cluster service account, else this file
    context: str | None = None
    page_size: int = Field(500, ge=1, le=10_000)
    watch_timeout: Duration = 300.0
    resync_every: Duration = 0.0  # 0: never re-list unless the watch says 410 Gone
    # One limit for "the picture is stale": the source's `healthy`, /readyz and the status page all use it.
    stale_after: Duration = Field(120.0, gt=0)


class ServerConfig(Section):
    host: str = "127.0.0.1"
    port: int = Field(8080, ge=0, le=65535)
    external_url: str = "http://127.0.0.1:8080"
    dashboard_url: str = ""
    runbook_url: str = ""  # base URL of one's own runbooks (a wiki); "": the service's own /runbooks
    api_token: SecretStr | None = None  # from WATCHTOWER_SERVER__API_TOKEN or api_token_file
    api_token_file: str | None = None


class StoreConfig(Section):
    path: str = "watchtower.db"


class SimulatorConfig(Section):
    seed: int = 7
    speed: float = Field(60.0, gt=0, le=100_000)  # simulated seconds per real second
    nodes: int = Field(12, ge=1, le=5000)
    gpus_per_node: int = Field(8, ge=1, le=64)
    teams: list[str] = ["vision", "nlp", "speech", "recsys"]
    team_gpu_quota: int = Field(40, ge=0)
    arrivals_per_hour: float = Field(40.0, ge=0)
    metrics_port: int = Field(0, ge=0, le=65535)  # 0: no /metrics; else served on 127.0.0.1 by `run`
    cordoned_nodes: int = Field(1, ge=0)  # nodes under maintenance (spec.unschedulable)
    warm_start: bool = True  # start nearly full of low-tier training, then a burst of higher tiers


class Settings(Section):
    """The whole configuration file."""

    cluster: ClusterConfig = ClusterConfig()
    tiers: list[TierConfig] = Field(default_factory=_default_tiers, min_length=1)
    training: TrainingConfig = TrainingConfig()
    teams: TeamsConfig = TeamsConfig()
    display: DisplayConfig = DisplayConfig()
    queue: QueueConfig = QueueConfig()
    server: ServerConfig = ServerConfig()
    store: StoreConfig = StoreConfig()
    simulator: SimulatorConfig = SimulatorConfig()
    alerting: AlertingConfig = AlertingConfig()
    prometheus: PrometheusConfig | None = None  # None: no GPU utilisation figures

    @field_validator("tiers")
    @classmethod
    def _distinct(cls, tiers: list[TierConfig]) -> list[TierConfig]:
        names = [t.name for t in tiers]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"tier names must be unique; repeated: {', '.join(dup)}")
        mins = [t.min_priority for t in tiers]
        dupm = sorted({m for m in mins if mins.count(m) > 1})
        if dupm:
            raise ValueError(f"two tiers share min_priority {dupm[0]}: a pod could not tell which it is in")
        classes = [c for t in tiers for c in t.classes]
        dupc = sorted({c for c in classes if classes.count(c) > 1})
        if dupc:
            raise ValueError(f"PriorityClass {dupc[0]!r} is listed in two tiers")
        return tiers

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
