"""Expressions over Watchtower's own `watchtower_*` series, each aggregated the one way that series allows.

Leader and standby replicas report the same cluster, so gauges of a state are taken with `max` over
replicas, never summed; counters and histograms are rated and summed as usual.
"""

from __future__ import annotations

from .names import (
    CONFIG_VALID,
    DISRUPTIONS,
    EVENT_LOOP_LAG,
    EVENT_LOOP_LAGS,
    LAST_EVALUATION,
    MOST_PREEMPTIONS,
    NEVER_WORKLOADS,
    OLDEST_WAIT,
    PARTIAL_GANG_GPUS_HELD,
    PARTIAL_GANGS,
    PENDING_WORKLOADS,
    PICTURE_STALENESS,
    PREEMPTION_GPU_HOURS_LOST,
    PREEMPTION_OUTCOMES,
    PREEMPTION_TO_RUNNING,
    PREEMPTIONS,
    PREEMPTIONS_UNHELPFUL,
    PREEMPTIONS_UNHELPFUL_GPU_HOURS,
    QUOTA_GPUS_HARD,
    QUOTA_GPUS_USED,
    TEAM_GPUS_ENTITLED,
    TEAM_GPUS_USED,
    TEAM_OLDEST_WAIT,
    TEAM_PREEMPTION_GPU_HOURS_LOST,
    TEAM_PREEMPTIONS,
    TEAM_SATISFACTION,
    THRASHING_WORKLOADS,
    TIME_TO_SCHEDULE,
    WAITING_GPUS,
    bucket,
    total,
)
from .syntax import aggregate, quoted


class OwnQueries:
    """Expressions over Watchtower's own series, each aggregated the one way that series allows.

    `selector` goes inside every selector's braces (`job="watchtower"`; "" for none). `by` names the labels
    kept; `window` is a range as text: a PromQL duration, or Grafana's `$__rate_interval`."""

    def __init__(self, selector: str = "") -> None:
        if any(c in selector for c in "{}"):
            raise ValueError(f"a selector is the text inside braces, without them: {selector!r}")
        self.selector = selector

    def series(self, name: str, *matchers: str) -> str:
        """Return `name` with the selector and `matchers` (text such as `tier="low"`; "" is left out)."""
        parts = [p for p in (self.selector, *matchers) if p]
        return f"{name}{{{','.join(parts)}}}" if parts else name

    def pending(self, *by: str, tier: str = "") -> str:
        """Waiting workloads (pending, partial gang or quota-blocked), summed over what `by` leaves out."""
        return aggregate("sum", by, self.series(PENDING_WORKLOADS, f"tier={quoted(tier)}" if tier else ""))

    def oldest_wait(self, *by: str, tier: str = "") -> str:
        """Longest current wait, seconds: max, not sum, as two replicas (leader and standby) report the
        same queue."""
        return aggregate("max", by, self.series(OLDEST_WAIT, f"tier={quoted(tier)}" if tier else ""))

    def partial_gangs(self, *by: str) -> str:
        """Gangs with some pods bound and some waiting."""
        return aggregate("sum", by, self.series(PARTIAL_GANGS))

    def partial_gang_gpus_held(self, *by: str) -> str:
        """GPUs held by the bound pods of partial gangs."""
        return aggregate("sum", by, self.series(PARTIAL_GANG_GPUS_HELD))

    def quota_use(self, *by: str) -> str:
        """GPU quota used as a share of its hard limit (0-1), where there is a limit."""
        used, hard = (
            aggregate("sum", by, self.series(QUOTA_GPUS_USED)),
            aggregate("sum", by, self.series(QUOTA_GPUS_HARD)),
        )
        return f"{used} / {hard} > 0"

    def _rate(self, fn: str, name: str, window: str, by: tuple[str, ...]) -> str:
        return aggregate("sum", by, f"{fn}({self.series(name)}[{window}])")

    def time_to_schedule_quantile(self, q: float, window: str) -> str:
        """The `q` quantile per tier of creation-to-binding times over `window`."""
        return f"histogram_quantile({q:g}, {self._rate('rate', bucket(TIME_TO_SCHEDULE), window, ('tier', 'le'))})"

    def scheduled_per_bucket(self, window: str, *by: str) -> str:
        """Pods scheduled within `window`, per wait bucket (`le`) and `by`."""
        return self._rate("increase", bucket(TIME_TO_SCHEDULE), window, (*by, "le"))

    def preemption_rate(self, window: str, *by: str) -> str:
        """Pods preempted per second over `window`."""
        return self._rate("rate", total(PREEMPTIONS), window, by)

    def gpu_hours_lost_rate(self, window: str, *by: str) -> str:
        """GPU-hours of work lost to preemption per second over `window`."""
        return self._rate("rate", total(PREEMPTION_GPU_HOURS_LOST), window, by)

    def team_preemption_rate(self, window: str, *by: str) -> str:
        """Pods preempted per second over `window`, by victim and preemptor team as `by` keeps them."""
        return self._rate("rate", total(TEAM_PREEMPTIONS), window, by)

    def team_gpu_hours_lost_rate(self, window: str, *by: str) -> str:
        """GPU-hours lost to preemption per second over `window`, by victim and preemptor team."""
        return self._rate("rate", total(TEAM_PREEMPTION_GPU_HOURS_LOST), window, by)

    def preemption_to_running_quantile(self, q: float, window: str) -> str:
        """The `q` quantile per preemptor tier of victim eviction to preemptor running, over `window`."""
        return f"histogram_quantile({q:g}, {self._rate('rate', bucket(PREEMPTION_TO_RUNNING), window, ('tier', 'le'))})"

    def preemptors_running_per_bucket(self, window: str, *by: str) -> str:
        """Preemptors that started within `window`, per latency bucket (`le`) and `by`."""
        return self._rate("increase", bucket(PREEMPTION_TO_RUNNING), window, (*by, "le"))

    def preemptions_judged(self, window: str, *by: str, outcome: str = "") -> str:
        """Preempted pods whose preemption was judged within `window` (of one `outcome`, else all)."""
        series = self.series(total(PREEMPTION_OUTCOMES), f"outcome={quoted(outcome)}" if outcome else "")
        return aggregate("sum", by, f"increase({series}[{window}])")

    def unhelpful_preemption_rate(self, window: str, *by: str) -> str:
        """Preempted pods whose preemption did not help, per second over `window`."""
        return self._rate("rate", total(PREEMPTIONS_UNHELPFUL), window, by)

    def unhelpful_gpu_hours_rate(self, window: str, *by: str) -> str:
        """GPU-hours thrown away by preemptions that did not help, per second over `window`."""
        return self._rate("rate", total(PREEMPTIONS_UNHELPFUL_GPU_HOURS), window, by)

    def disruption_rate(self, window: str, *by: str) -> str:
        """Pods taken away for reasons other than preemption, per second over `window`."""
        return self._rate("rate", total(DISRUPTIONS), window, by)

    def thrashing(self, *by: str) -> str:
        """Workloads preempted at least the thrash count of times within the thrash window: the worst
        replica, as leader and standby count the same cluster."""
        return aggregate("max", by, self.series(THRASHING_WORKLOADS))

    def most_preemptions(self, *by: str, tier: str = "") -> str:
        """The most preemptions one workload had within the thrash window."""
        return aggregate("max", by, self.series(MOST_PREEMPTIONS, f"tier={quoted(tier)}" if tier else ""))

    def never_startable(self, *by: str) -> str:
        """Waiting workloads that can never start as configured: the worst replica, as leader and standby
        count the same cluster."""
        return aggregate("max", by, self.series(NEVER_WORKLOADS))

    def evaluation_changes(self, window: str) -> str:
        """How often the last-evaluation time moved within `window`: 0 when Watchtower has stalled."""
        return f"changes({self.series(LAST_EVALUATION)}[{window}])"

    def loop_lag(self, *by: str) -> str:
        """How late the event loop woke its latest timer, seconds: the worst over what `by` leaves out (each
        replica has a loop of its own, so keep `instance` to see which one stalls)."""
        return aggregate("max", by, self.series(EVENT_LOOP_LAG))

    def loop_lag_quantile(self, q: float, window: str, *by: str) -> str:
        """The `q` quantile of the event loop's wake-up lags over `window`: stalls between two scrapes."""
        return (
            f"histogram_quantile({q:g}, {self._rate('rate', bucket(EVENT_LOOP_LAGS), window, (*by, 'le'))})"
        )

    def config_invalid(self, *by: str) -> str:
        """1 where the configuration file changed to one that could not be applied (the worst replica)."""
        return f"{aggregate('max', by, f'1 - {self.series(CONFIG_VALID)}')} > 0"

    def per_team(self, name: str, *matchers: str) -> str:
        """One of the per-team fairness gauges (TEAM_GPUS_*, TEAM_SATISFACTION) per team: the highest
        replica's, as leader and standby report the same cluster."""
        return aggregate("max", ("team",), self.series(name, *matchers))

    def team_mean(self, name: str, window: str, *matchers: str) -> str:
        """A per-team gauge's mean over `window` (a duration or Grafana's `$__range`), per team: times the
        window's hours, GPU-hours."""
        return aggregate("max", ("team",), f"avg_over_time({self.series(name, *matchers)}[{window}])")

    def team_waiting_gpus(self, *by: str, team: str = "") -> str:
        """GPUs waiting work still needs, per `by` (team, tier): max over replicas of each pair, then summed."""
        sel = self.series(WAITING_GPUS, f"team=~{quoted(team)}" if team else "")
        return aggregate("sum", by, aggregate("max", ("team", "tier"), sel))

    def team_oldest_wait(self, *by: str, team: str = "") -> str:
        """Longest current wait per `by` (team, tier)."""
        return aggregate("max", by, self.series(TEAM_OLDEST_WAIT, f"team=~{quoted(team)}" if team else ""))

    def jain_index(self) -> str:
        """Jain's index (Σx)² / (n·Σx²) of the satisfaction x of the teams with demand (1: all equally
        satisfied; 1/n: one team has it all); nothing when there is no such team or every x is 0."""
        x = self.per_team(TEAM_SATISFACTION)
        return f"(sum ({x}) ^ 2) / ((count ({x}) * sum ({x} ^ 2)) > 0)"

    def attainment(self) -> str:
        """GPUs used over GPUs entitled, per team with an entitlement (U/E now)."""
        return f"{self.per_team(TEAM_GPUS_USED)} / ({self.per_team(TEAM_GPUS_ENTITLED)} > 0)"

    def staleness(self, *by: str) -> str:
        """Seconds since the cluster source last heard from the API server (all kinds): the worst replica."""
        return aggregate("max", by, self.series(PICTURE_STALENESS, 'kind="all"'))
