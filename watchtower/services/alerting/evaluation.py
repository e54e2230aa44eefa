"""Evaluation: each Tick → the rules → every alert moved along its lifecycle → the store → groups placed.

The rules, the lifecycle, the store write and working out each alert's groups run in a worker thread: for
a storm of 10,000 alerts they take a good part of a second, during which the API, the flushes and the
deliveries must go on. What they read is immutable (the Tick, the alerts before); what they produce is
applied back on the loop, where only the swap and the filing into groups (a dict update per group) remain.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from watchtower.config.model import Settings
from watchtower.domain.alerts.dispatch import Dispatcher, Filing
from watchtower.domain.alerts.holders import gpu_holders
from watchtower.domain.alerts.lifecycle import advance
from watchtower.domain.alerts.model import AlertState, TrackedAlert, with_cluster
from watchtower.domain.alerts.rules import RuleInput, RuleSettings, WatchHealth, evaluate_rules
from watchtower.domain.alerts.rules.priority_inversion import BlockerIndex
from watchtower.domain.estimate import TierWaits
from watchtower.domain.health import SourceHealth
from watchtower.domain.queue import QueueSnapshot
from watchtower.domain.state import ClusterState
from watchtower.domain.stuck import StuckHead
from watchtower.domain.tick import Tick
from watchtower.domain.tiers import TierPolicy
from watchtower.ports import AlertStore

from .metrics import AlertingMetrics

log = logging.getLogger(__name__)

# How far the stored `last_seen` of an alert may lag behind the one in memory (seconds).
LAST_SEEN_SLACK = 60.0


def rule_settings(settings: Settings) -> RuleSettings:
    return settings.rule_settings()


def alerts_for_snapshot(
    snapshot: QueueSnapshot,
    settings: Settings,
    now: float,
    *,
    state: ClusterState | None = None,
    tiers: TierPolicy | None = None,
    stuck: Sequence[StuckHead] = (),
    waits: TierWaits | None = None,
) -> list[dict[str, Any]]:
    """Return the alerts the rules raise at `now` (ignoring `for`, silences and inhibition), for `analyze`.

    `stuck` and `waits` are what a Tick carries (the heads stuck despite capacity, each tier's recent time
    to schedule): without them a dump would show fewer alerts than the service raises on the same cluster."""
    tiers = tiers or settings.tier_policy()
    inp = RuleInput(
        snapshot=snapshot,
        now=now,
        tiers=tiers,
        settings=rule_settings(settings),
        holders=gpu_holders(state, tiers) if state is not None else (),
        stuck=stuck,
        waits=waits,
    )
    return [
        {
            "rule": c.alertname,
            "severity": c.severity,
            "labels": dict(c.labels),
            "summary": c.annotations.get("summary", ""),
        }
        for c in evaluate_rules(inp)
    ]


@dataclass(frozen=True, slots=True)
class _Evaluated:
    """One evaluation's outcome, made off the loop and applied on it."""

    alerts: dict[str, TrackedAlert]
    restored: list[Filing]  # the stored alerts' groups, on the first evaluation after a start
    filings: list[Filing]
    firing: dict[tuple[str, str], int]  # (alertname, severity) → alerts firing


class AlertEvaluator:
    """The alerts in memory (pending, firing, recently resolved) and the groups they are placed in."""

    def __init__(
        self,
        *,
        settings: Settings,
        store: AlertStore,
        metrics: AlertingMetrics | None = None,
        on_changed: Callable[[], None] | None = None,
    ) -> None:
        cfg = settings.alerting
        self.tiers = settings.tier_policy()
        self.rule_settings = rule_settings(settings)
        # Unset until the root has found the cluster's name (`cluster.name` or its default).
        self.cluster = (settings.cluster.label, settings.cluster.name)
        self.lifecycle = cfg.rules.lifecycle(cfg.resolved_retention)
        self.store = store
        self.metrics = metrics
        self.on_changed = on_changed  # the notifier's wake-up
        self._routes = cfg.route_tree()
        self.dispatcher = Dispatcher(self._routes)
        self.alerts: dict[str, TrackedAlert] = {a.fingerprint: a for a in store.load_alerts()}
        # fingerprint → the `last_seen` last written to the store
        self._saved_seen: dict[str, float] = {fp: a.last_seen for fp, a in self.alerts.items()}
        self._restored = False
        self._unhealthy_since: float | None = None
        self._evaluating = asyncio.Lock()
        # The priority-inversion rule's blockers, moved tick by tick; used under `_evaluating` only.
        self._blockers = BlockerIndex()
        self.last_tick_at: float | None = None
        # Problems of a configuration file that changed and was not applied (WatchtowerConfigInvalid).
        self.config_problems: tuple[str, ...] = ()

    async def on_tick(self, tick: Tick) -> None:
        """Run the rules on a Tick and move every alert along its lifecycle; changes are saved first."""
        async with self._evaluating:
            health = self._watch_health(tick.health, tick.at)
            done = await asyncio.to_thread(self._evaluate, tick, health, self.alerts)
            self._apply(done, tick.at)

    async def reload(self, *, regroup: bool) -> None:
        """Take the stored alerts as they are: another replica led until now and wrote them.

        With `regroup` (this replica now leads) the groups are rebuilt from them at the next evaluation,
        as after a restart, and the notification log keeps them from re-sending what the other sent;
        without it only the alerts the API lists are refreshed."""
        async with self._evaluating:
            stored = await asyncio.to_thread(self.store.load_alerts)
            self.alerts = {a.fingerprint: a for a in stored}
            self._saved_seen = {fp: a.last_seen for fp, a in self.alerts.items()}
            if regroup:
                self.dispatcher = Dispatcher(self._routes)
                self._restored = False

    def _rule_input(self, tick: Tick, health: WatchHealth) -> RuleInput:
        return RuleInput(
            # With the running workloads the Tick carries: the rules see what they alert on (an idle holder,
            # a thrashing workload that runs again) as analyze does, and running ones never alert as waiting.
            snapshot=tick.snapshot_with_holders(),
            now=tick.at,
            tiers=self.tiers,
            settings=self.rule_settings,
            holders=tick.holders,
            holder_changes=tick.holder_changes,
            health=health,
            gone_receivers=self.store.disabled(),
            gpu_alerts=tick.gpu_alerts,
            stuck=tick.stuck,
            waits=tick.waits,
            config_problems=self.config_problems,
        )

    def _evaluate(self, tick: Tick, health: WatchHealth, before: Mapping[str, TrackedAlert]) -> _Evaluated:
        """Off the loop: the rules, the lifecycle, the store write, and where each alert goes; what is
        left for the loop is to swap the alerts in and file them (`_apply`)."""
        inp = self._rule_input(tick, health)
        found = with_cluster(evaluate_rules(inp, blockers=self._blockers), *self.cluster)
        after, changes = advance(before, found, now=inp.now, policy=self.lifecycle)
        gone = [fp for fp in before if fp not in after]
        self.store.save_alerts(
            [a for a in after.values() if self._worth_saving(before.get(a.fingerprint), a)], gone
        )
        for fp in gone:
            self._saved_seen.pop(fp, None)
        firing = [a for a in after.values() if a.state is AlertState.FIRING]
        resolved_now = [t.alert for t in changes if t.alert.state is AlertState.RESOLVED]
        # After a restart, the groups are rebuilt from the stored alerts first; the notification log
        # keeps them from re-sending what was already sent.
        restored = [] if self._restored else self.dispatcher.plan(before.values())
        counts: dict[tuple[str, str], int] = {}
        for a in firing:
            k = (a.alertname, a.severity)
            counts[k] = counts.get(k, 0) + 1
        return _Evaluated(after, restored, self.dispatcher.plan(firing + resolved_now), counts)

    def _apply(self, done: _Evaluated, now: float) -> None:
        if not self._restored:
            self.dispatcher.file(done.restored, now=now)
            self._restored = True
        self.alerts = done.alerts
        self.last_tick_at = now
        self.dispatcher.file(done.filings, now=now)
        if self.metrics is not None:
            self.metrics.firing.clear()
            for (n, sev), c in done.firing.items():
                self.metrics.firing.labels(n, sev).set(c)
        if self.on_changed is not None:
            self.on_changed()

    def _worth_saving(self, old: TrackedAlert | None, new: TrackedAlert) -> bool:
        """Return True when the stored copy of an alert must be rewritten.

        Every tick refreshes `last_seen` and the annotations (the wait grows), and rewriting 10,000 rows a
        tick for that is what made a storm slow. What a restart needs is the state and its times; the
        annotations come back with the first evaluation, and `last_seen` is kept fresh to within
        LAST_SEEN_SLACK, which is all `keep_firing_for` can lose across a restart.
        """
        saved = self._saved_seen.get(new.fingerprint)
        must = (
            old is None
            or saved is None
            or old.state is not new.state
            or old.active_at != new.active_at
            or old.fired_at != new.fired_at
            or old.resolved_at != new.resolved_at
            or new.last_seen - saved >= LAST_SEEN_SLACK
        )
        if must:
            self._saved_seen[new.fingerprint] = new.last_seen
        return must

    def _watch_health(self, h: SourceHealth, now: float) -> WatchHealth:
        if h.healthy:
            self._unhealthy_since = None
            return WatchHealth()
        since = self._unhealthy_since if self._unhealthy_since is not None else now
        stale = h.stale_seconds
        if stale is not None:
            since = min(since, now - stale)
        self._unhealthy_since = since
        detail = f"stale for {stale}s" if stale is not None else "the watch reports unhealthy"
        return WatchHealth(since, detail)
