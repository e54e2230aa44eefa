"""The `prometheus:` section: where the cluster's Prometheus is, how patiently to read it, what idle means."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from watchtower.domain.gpu_usage import IdlePolicy
from watchtower.domain.promql import LabelMapping, QueryConfig, check_window

from .durations import Duration


class Section(BaseModel):
    # As model.Section; not imported from there because model.py imports this module.
    model_config = ConfigDict(extra="forbid", frozen=True)


class LabelMappingConfig(Section):
    """Label spellings: the first of each list is the name queries output; later spellings win when present."""

    pod: list[str] = ["pod", "pod_name", "exported_pod"]
    namespace: list[str] = ["namespace", "pod_namespace", "exported_namespace"]
    container: list[str] = ["container", "container_name", "exported_container"]
    hostname: list[str] = ["Hostname", "hostname"]
    uuid: list[str] = ["UUID", "uuid"]

    def mapping(self) -> LabelMapping:
        return LabelMapping(
            pod=tuple(self.pod),
            namespace=tuple(self.namespace),
            container=tuple(self.container),
            hostname=tuple(self.hostname),
            uuid=tuple(self.uuid),
        )

    @model_validator(mode="after")
    def _valid(self) -> LabelMappingConfig:
        self.mapping()  # raises ValueError with the offending entry
        return self


class PrometheusConfig(Section):
    url: str = Field(pattern=r"^https?://")
    timeout: Duration = Field(10.0, gt=0)  # per HTTP attempt; Prometheus is also told to stop the query then
    retries: int = Field(2, ge=0, le=10)
    backoff: Duration = 0.5  # first pause between attempts, doubled after each
    scrape_interval: Duration = Field(30.0, gt=0)  # of the DCGM and KSM jobs: windows must span 4 scrapes
    query_every: Duration = Field(60.0, gt=0)
    query_step: Duration = Field(60.0, gt=0)  # resolution of subqueries (first-seen, history)
    labels: LabelMappingConfig = LabelMappingConfig()
    dcgm_selector: str = ""
    ksm_selector: str = 'job="kube-state-metrics"'
    idle_threshold: float = Field(10.0, gt=0, le=100)  # percent utilisation
    idle_window: Duration = 1800.0
    unreachable_failures: int = Field(1, ge=1)  # consecutive failed reads before the self-alert

    @field_validator("url")
    @classmethod
    def _no_trailing_slash(cls, v: str) -> str:
        return v.rstrip("/")

    @model_validator(mode="after")
    def _windows(self) -> PrometheusConfig:
        check_window(self.idle_window, self.scrape_interval)
        if self.query_step >= self.idle_window:
            raise ValueError(
                f"query_step ({self.query_step:g}s) is not shorter than idle_window ({self.idle_window:g}s)"
            )
        self.query_config()
        return self

    def query_config(self, team_label: str = "team") -> QueryConfig:
        return QueryConfig(
            labels=self.labels.mapping(),
            dcgm_selector=self.dcgm_selector,
            ksm_selector=self.ksm_selector,
            team_label=team_label,
            ksm_bridge=2 * self.scrape_interval,  # one missed KSM scrape must not empty the allocation
        )

    def idle_policy(self) -> IdlePolicy:
        return IdlePolicy(threshold=self.idle_threshold, window=self.idle_window, slack=self.query_step)
