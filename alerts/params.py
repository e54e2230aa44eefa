"""What the generated rules take from the configuration: tiers, windows, selectors, rule timings, runbook links.

Everything is read from one `Settings`, so the service, the rules, their unit tests and the dashboards follow the
same tier policy. Without a `prometheus:` section the Prometheus defaults of the config model apply (the rules
still need a scrape interval and an idle threshold, even if the service itself reads no Prometheus).
"""

from __future__ import annotations

from dataclasses import dataclass

from watchtower.config import Settings
from watchtower.config.prometheus import PrometheusConfig
from watchtower.domain.alerts.rules.base import RUNBOOK_URL, runbook_link
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.promql.own import OwnQueries
from watchtower.domain.promql.syntax import MIN_SCRAPES_PER_WINDOW, check_window, duration
from watchtower.domain.tiers import TierPolicy

# Rate and "nothing changed" windows never shorter than this, whatever the scrape interval: a 2-minute rate
# of a counter that moves a few times an hour is mostly noise.
MIN_RATE_WINDOW = 300.0


@dataclass(frozen=True, slots=True)
class RuleParams:
    tiers: TierPolicy
    queries: ExporterQueries
    scrape_interval: float
    idle_threshold: float
    idle_window: float
    evaluate_every: float
    unreachable_after: float
    pending_for: float
    pending_for_by_rule: dict[str, float]
    keep_firing_for: float
    watchtower_selector: str
    runbook_base: str
    thrash_count: int = 3
    thrash_window: float = 3600.0
    fairness_step: float = 300.0  # fairness.step: the interval of the fairness usage rules
    # Fleet mode: the labels every aggregation and join keeps (the cluster label); () for one cluster.
    keep: tuple[str, ...] = ()

    @property
    def own(self) -> OwnQueries:
        """Queries over Watchtower's own series, as scraped with `watchtower_selector`."""
        return OwnQueries(self.watchtower_selector)

    @property
    def rate_window(self) -> float:
        return max(MIN_RATE_WINDOW, MIN_SCRAPES_PER_WINDOW * self.scrape_interval)

    @property
    def stall_window(self) -> float:
        """How long the evaluation timestamp may stand still before Watchtower counts as stalled."""
        return max(self.rate_window, MIN_SCRAPES_PER_WINDOW * self.evaluate_every)

    @property
    def down_for(self) -> float:
        return max(MIN_RATE_WINDOW, MIN_SCRAPES_PER_WINDOW * self.scrape_interval)

    def w(self, seconds: float) -> str:
        """Return a PromQL range for `seconds`, refusing one shorter than 4 scrapes."""
        check_window(seconds, self.scrape_interval)
        return duration(seconds)

    def for_of(self, alertname: str, mirrors: str = "") -> float:
        """Return the `for` of a rule: its own entry, else the entry of the service alert it mirrors, else the
        common `pending_for`."""
        by = self.pending_for_by_rule
        return by.get(alertname, by.get(mirrors, self.pending_for))

    def summary(self, text: str) -> str:
        """Return an alert's summary; in fleet mode beginning with its cluster, so a notification names it."""
        return f"[{{{{ $labels.{self.keep[0]} }}}}] {text}" if self.keep else text

    def runbook_url(self, alertname: str) -> str:
        return runbook_link(self.runbook_base, alertname)


def params_from(
    settings: Settings,
    *,
    watchtower_selector: str | None = None,
    runbook_base: str = RUNBOOK_URL,
) -> RuleParams:
    """Return the rule parameters of `settings` (the selector: `artefacts.job_selector` unless given); raise
    ValueError for a selector written with braces."""
    if watchtower_selector is None:
        watchtower_selector = settings.artefacts.job_selector
    if any(c in watchtower_selector for c in "{}"):
        raise ValueError(f"a selector is the text inside braces, without them: {watchtower_selector!r}")
    # The URL is not used here: only the scrape interval, idle policy and label mapping.
    prom = settings.prometheus or PrometheusConfig(url="http://127.0.0.1:9090")
    rules = settings.alerting.rules
    return RuleParams(
        tiers=settings.tier_policy(),
        queries=ExporterQueries(prom.query_config(team_label=settings.teams.label)),
        scrape_interval=prom.scrape_interval,
        idle_threshold=prom.idle_threshold,
        idle_window=prom.idle_window,
        evaluate_every=settings.queue.evaluate_every,
        unreachable_after=rules.unreachable_after,
        pending_for=rules.pending_for,
        pending_for_by_rule=dict(rules.pending_for_by_rule),
        keep_firing_for=rules.keep_firing_for,
        watchtower_selector=watchtower_selector,
        runbook_base=runbook_base,
        thrash_count=rules.thrash_count,
        thrash_window=settings.queue.thrash_window,
        fairness_step=settings.fairness.step,
        keep=(settings.cluster.label,) if settings.artefacts.fleet else (),
    )
