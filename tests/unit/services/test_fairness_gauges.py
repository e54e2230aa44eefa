"""The fairness gauges `/metrics` exports each tick, from the QueueTracker fed by the simulator: every GPU in use
is some team's, the waiting GPUs are the waiting workloads', fair shares split what there is, and only
teams with demand have a satisfaction (Jain's index is taken over them)."""

from __future__ import annotations

import msgspec
import pytest
from prometheus_client import CollectorRegistry

from watchtower.adapters.metrics.registry import WatchtowerMetrics
from watchtower.bootstrap import object_decoder
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.domain.queue import WAITING_STATES
from watchtower.services.queue_tracker import QueueTracker
from watchtower.simulator.cluster import KINDS, SimulatedCluster


class SimClock:
    def __init__(self, sim: SimulatedCluster) -> None:
        self.sim = sim

    def now(self) -> float:
        return self.sim.now()


@pytest.fixture(scope="module")
def run():
    sim = demo_cluster(SimulatorConfig(seed=7, nodes=6))
    settings = Settings()
    registry = CollectorRegistry()
    tracker = QueueTracker(
        settings=settings,
        clock=SimClock(sim),
        metrics=WatchtowerMetrics(registry=registry),
        decoder=object_decoder(settings),
        source_health=sim.feed_health,
    )
    for kind in KINDS:
        tracker.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
    tick = None
    for _ in range(15):
        sim.step(60)
        for kind, type_, raw in sim.drain():
            tracker.on_change(kind, type_, raw)
        tick = tracker.evaluate(sim.now())
    assert tick is not None
    return tracker, registry, tick


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[str, ...], float]:
    return {
        tuple(v for _, v in sorted(s.labels.items())): s.value
        for m in registry.collect()
        for s in m.samples
        if s.name == name
    }


def test_every_gpu_in_use_is_counted_for_exactly_one_team(run) -> None:
    _, registry, tick = run
    used = _samples(registry, "watchtower_team_gpus_used")
    assert len(used) >= 2
    assert sum(used.values()) == tick.snapshot.capacity.used > 0


def test_the_waiting_gpus_per_team_and_tier_are_what_the_waiting_workloads_still_need(run) -> None:
    _, registry, tick = run
    want: dict[tuple[str, str], int] = {}
    for w in tick.snapshot.workloads:
        f = w.facts
        if f.state in WAITING_STATES:
            want[(f.team, f.tier)] = want.get((f.team, f.tier), 0) + f.gpus_requested - f.gpus_held
    assert sum(want.values()) > 0
    assert _samples(registry, "watchtower_waiting_gpus") == {k: float(v) for k, v in want.items()}
    oldest = _samples(registry, "watchtower_team_oldest_wait_seconds")
    assert set(oldest) <= set(want) and max(oldest.values()) > 0


def test_fair_shares_split_the_capacity_over_the_demands(run) -> None:
    _, registry, tick = run
    demand = _samples(registry, "watchtower_team_gpus_demand")
    fair = _samples(registry, "watchtower_team_gpus_fair_share")
    assert set(fair) == set(demand)
    assert all(fair[t] <= demand[t] + 1e-9 for t in fair)
    assert sum(fair.values()) == pytest.approx(min(tick.snapshot.capacity.allocatable, sum(demand.values())))


def test_only_teams_with_demand_have_a_satisfaction_between_0_and_1(run) -> None:
    _, registry, _ = run
    demand = _samples(registry, "watchtower_team_gpus_demand")
    sat = _samples(registry, "watchtower_team_satisfaction")
    assert set(sat) == {t for t, d in demand.items() if d > 0}
    assert all(0.0 <= x <= 1.0 for x in sat.values())


def test_entitlement_is_read_team_by_team_kueue_first_then_the_quotas(run) -> None:
    tracker, registry, tick = run
    entitled = {
        team: (source, v) for (source, team), v in _samples(registry, "watchtower_team_gpus_entitled").items()
    }
    kueue_teams = {t for q in tick.kueue_queues for t in q.teams if q.nominal_gpus}
    quota_teams = {
        tracker.state.team_of(q.namespace) for q in tracker.state.control.quotas.values() if q.hard_gpus
    }
    assert kueue_teams and quota_teams - kueue_teams
    assert {t for t, (s, _) in entitled.items() if s == "kueue"} == kueue_teams
    assert {t for t, (s, _) in entitled.items() if s == "quota"} == quota_teams - kueue_teams
    assert all(v == 0 for s, v in entitled.values() if s == "none")
