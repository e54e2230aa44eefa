"""The churn metrics `/metrics` exports, from the QueueTracker fed by the simulator (its scheduler preempts as
kube-scheduler does): team pairs count the same preemptions as tier pairs, preemptors are timed from their
victims' eviction to their start, thrash per tier follows the workloads' recent preemptions, and an eviction
by the eviction API is a disruption, never a preemption."""

from __future__ import annotations

import json

import msgspec
from prometheus_client import CollectorRegistry

from watchtower.adapters.metrics.registry import WatchtowerMetrics
from watchtower.bootstrap import object_decoder
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import Settings, SimulatorConfig
from watchtower.services.queue_tracker import QueueTracker
from watchtower.simulator.cluster import KINDS, SimulatedCluster


class SimClock:
    def __init__(self, sim: SimulatedCluster) -> None:
        self.sim = sim

    def now(self) -> float:
        return self.sim.now()


def _run(minutes: int = 40):
    sim = demo_cluster(SimulatorConfig(seed=5, nodes=4))
    settings = Settings()
    registry = CollectorRegistry()
    metrics = WatchtowerMetrics(registry=registry)
    tracker = QueueTracker(
        settings=settings,
        clock=SimClock(sim),
        metrics=metrics,
        decoder=object_decoder(settings),
        source_health=sim.feed_health,
    )
    for kind in KINDS:
        tracker.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
    tick = None
    for _ in range(minutes):
        sim.step(60)
        for kind, type_, raw in sim.drain():
            tracker.on_change(kind, type_, raw)
        tick = tracker.evaluate(sim.now())
    return sim, tracker, registry, tick


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value
        for m in registry.collect()
        for s in m.samples
        if s.name == name
    }


def test_team_pairs_count_the_same_preemptions_as_tier_pairs_and_lose_the_same_gpu_hours() -> None:
    _, tracker, registry, _ = _run()
    tiers = _samples(registry, "watchtower_preemptions_total")
    teams = _samples(registry, "watchtower_team_preemptions_total")
    assert sum(tiers.values()) >= 5 and sum(teams.values()) == sum(tiers.values())
    namespaces = {p.victim_namespace for p in tracker.state.ledger.preemptions.values()}
    victim_teams = {dict(k)["victim_team"] for k in teams}
    assert victim_teams <= {tracker.state.team_of(ns) for ns in namespaces} | {"unknown"}
    lost_tiers = sum(_samples(registry, "watchtower_preemption_gpu_hours_lost_total").values())
    lost_teams = sum(_samples(registry, "watchtower_team_preemption_gpu_hours_lost_total").values())
    assert lost_tiers > 0 and abs(lost_teams - lost_tiers) < 1e-9


def test_each_preemptor_that_started_is_timed_once_from_its_victims_eviction() -> None:
    _, tracker, registry, _ = _run()
    counts = _samples(registry, "watchtower_preemption_to_running_seconds_count")
    preemptors = {
        p.preemptor_uid
        for p in tracker.state.ledger.preemptions.values()
        if p.preemptor_uid and p.preemptor_kind != "PodGroup"
    }
    started = [u for u in preemptors if (pod := tracker.state.pods.get(u)) and pod.running_since]
    assert started and 0 < sum(counts.values()) <= len(preemptors)
    evicted = {}
    for p in tracker.state.ledger.preemptions.values():
        if p.preemptor_uid in started and p.at is not None:
            evicted[p.preemptor_uid] = min(evicted.get(p.preemptor_uid, p.at), p.at)
    total = sum(_samples(registry, "watchtower_preemption_to_running_seconds_sum").values())
    expected = sum(tracker.state.pods[u].running_since - evicted[u] for u in evicted)
    # Preemptors that finished since are gone from the state, but were timed when they started.
    assert len(evicted) <= sum(counts.values()) <= len(preemptors)
    assert expected <= total + 1e-6


def test_thrash_per_tier_follows_the_workloads_recent_preemptions() -> None:
    _, _, registry, tick = _run()
    counts = tick.snapshot.recent_preemptions.counts
    thrashing = _samples(registry, "watchtower_thrashing_workloads")
    most = _samples(registry, "watchtower_workload_preemptions_max")
    threshold = Settings().alerting.rules.thrash_count
    assert sum(thrashing.values()) == sum(1 for n in counts.values() if n >= threshold) >= 1
    assert max(most.values()) == max(counts.values())
    assert {dict(k)["tier"] for k in most} >= {t.name for t in Settings().tier_policy().tiers}


def test_an_eviction_by_the_eviction_api_is_a_disruption_not_a_preemption() -> None:
    sim, tracker, registry, _ = _run(minutes=5)
    before = sum(_samples(registry, "watchtower_preemptions_total").values())
    pod = next(p for p in map(json.loads, sim.list_objects("Pod")) if p["status"].get("phase") == "Running")
    pod["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
            "lastTransitionTime": pod["status"]["startTime"],
        }
    )
    tracker.on_change("Pod", "MODIFIED", json.dumps(pod).encode())
    tracker.on_change("Pod", "MODIFIED", json.dumps(pod).encode())  # a replay counts once
    tier = tracker._tier_of(tracker.state.pods[pod["metadata"]["uid"]])
    assert _samples(registry, "watchtower_disruptions_total") == {
        (("reason", "EvictionByEvictionAPI"), ("tier", tier)): 1.0
    }
    assert sum(_samples(registry, "watchtower_preemptions_total").values()) == before
