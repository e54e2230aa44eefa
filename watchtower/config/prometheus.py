"""The `prometheus:` section: where the cluster's Prometheus is, how patiently to read it, what idle means."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from watchtower.domain.gpu_usage import IdlePolicy
from watchtower.domain.promql.exporters import LabelMapping, QueryConfig

from .consistency import prometheus_problems, raise_problems
from .durations import Duration, PositiveDuration


class Section(BaseModel):
    # As model.Section; not imported from there because model.py imports this module.
    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)


# One copy of each default: the domain's value types hold them (the exporters' label spellings, the
# kubernetes-mixin's KSM selector, the idle threshold) and the configuration offers them as its defaults.
_LABELS = LabelMapping()
_QUERY = QueryConfig()
_IDLE = IdlePolicy()


class LabelMappingConfig(Section):
    """Label spellings: the first of each list is the name queries output; later spellings win when present."""

    pod: list[str] = list(_LABELS.pod)
    """Spellings of the pod label; the first is the name queries output."""
    namespace: list[str] = list(_LABELS.namespace)
    """Spellings of the namespace label."""
    container: list[str] = list(_LABELS.container)
    """Spellings of the container label."""
    hostname: list[str] = list(_LABELS.hostname)
    """Spellings of DCGM's node label."""
    uuid: list[str] = list(_LABELS.uuid)
    """Spellings of DCGM's GPU UUID label."""

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
    """Prometheus base URL, e.g. `http://prometheus.monitoring:9090`."""
    timeout: PositiveDuration = 10.0
    """Timeout of each HTTP attempt; Prometheus is told to stop the query then too."""
    retries: int = Field(2, ge=0, le=10)
    """Further attempts after a failed one."""
    backoff: Duration = 0.5
    """First pause between attempts, doubled after each; `0s`: retry at once."""
    scrape_interval: PositiveDuration = 30.0
    """Scrape interval of the DCGM and kube-state-metrics jobs; windows must span 4 scrapes."""
    query_every: PositiveDuration = 60.0
    """How often GPU utilisation is read."""
    query_step: PositiveDuration = 60.0
    """Resolution of subqueries (first seen, history); shorter than idle_window."""
    labels: LabelMappingConfig = LabelMappingConfig()
    """Label spellings of your exporters; later spellings win when present."""
    dcgm_selector: str = _QUERY.dcgm_selector
    """Selector of the DCGM exporter's series, without braces, e.g. `job="dcgm-exporter"`; empty: every job."""
    ksm_selector: str = _QUERY.ksm_selector
    """Selector of kube-state-metrics' series, without braces."""
    idle_threshold: float = Field(_IDLE.threshold, gt=0, le=100)
    """A GPU under this utilisation (percent) is idle."""
    idle_window: PositiveDuration = _IDLE.window
    """A GPU idle for this long is reported; at least 4 scrape intervals."""
    unreachable_failures: int = Field(1, ge=1)
    """Consecutive failed reads before the PrometheusUnreachable self-alert."""

    @field_validator("url")
    @classmethod
    def _no_trailing_slash(cls, v: str) -> str:
        return v.rstrip("/")

    @model_validator(mode="after")
    def _windows(self) -> PrometheusConfig:
        raise_problems(
            prometheus_problems(self.model_dump(include={"idle_window", "scrape_interval", "query_step"}))
        )
        return self

    @model_validator(mode="after")
    def _selectors(self) -> PrometheusConfig:
        self.query_config()  # raises ValueError naming the selector
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
