"""The QueueTracker on the simulator reports its gated groups as waiting work in the gated form's words: a
Kueue plain-pod group held for quota and bare pods Volcano holds for their queue (issue 30 part 1)."""

from __future__ import annotations

from dataclasses import replace

import msgspec

from tests.fixtures.scenario import ManualClock
from watchtower.bootstrap import build_container
from watchtower.config import Settings
from watchtower.config.model import SimulatorConfig
from watchtower.services.queue_json import workload_dict
from watchtower.simulator.cluster import KINDS, SimulatedCluster
from watchtower.simulator.forms.gangs.controller import Gangs
from watchtower.simulator.forms.kueue.controller import KueueStandIn
from watchtower.simulator.workloads import WorkloadSpec, single_pod

NS = "team-a"


def bare_pods(name: str, gpus: int, **kw: str) -> WorkloadSpec:
    spec = single_pod(
        kind="Job", name=name, team="a", priority_class="experiment", gpus=gpus, replicas=2, duration=3600
    )
    return replace(spec, kind="Pod", **kw)


def test_the_tracker_on_the_simulator_lists_both_gated_groups_as_waiting_in_the_gated_forms_words() -> None:
    cfg = SimulatorConfig(
        seed=4,
        nodes=2,
        cordoned_nodes=0,
        arrivals_per_hour=0,
        teams=["a", "b"],
        warm_start=False,
        dra_nodes=0,
    )
    sim = SimulatedCluster(cfg)
    sim.form(KueueStandIn).setup(4, [NS])
    sim.form(Gangs).volcano.add_queue("vision-q", capability_gpus=4)
    # Each first group takes its queue's room; each second is held behind it.
    sim.submit(bare_pods("k-first", 2, kueue_queue="research", kueue_class="kueue-low"))
    sim.submit(bare_pods("v-first", 2, volcano_queue="vision-q"))
    sim.step(1)
    sim.submit(bare_pods("k-held", 2, kueue_queue="research", kueue_class="kueue-low"))
    sim.submit(bare_pods("v-held", 2, volcano_queue="vision-q"))

    clock = ManualClock(sim.now())
    c = build_container(Settings(), clock=clock, source_health=sim.feed_health, source_name="test")
    tracker = c.queue_tracker
    sim.drain()
    for kind in KINDS:
        tracker.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
    sim.step(300)
    for kind, type_, b in sim.drain():
        tracker.on_change(kind, type_, b)
    clock.t = sim.now()
    snap = tracker.evaluate(clock.now()).snapshot
    waiting = {w.key.name: w for w in snap.waiting()}
    assert {"k-held", "v-held"} <= set(waiting) and not {"k-first", "v-first"} & set(waiting)
    k, v = waiting["k-held"], waiting["v-held"]
    assert (k.key.kind, k.pods_gated, k.pods_expected) == ("KueueWorkload", 2, 2)
    assert k.why.startswith(
        "held by Kueue: waiting for quota in ClusterQueue research-cq (couldn't assign flavors"
    )
    assert (v.key.kind, v.pods_gated, v.queue) == ("PodGroup", 2, "vision-q")
    assert v.why == "held by Volcano queue vision-q: its capability is used up (4 of 4 GPUs allocated)"
    assert workload_dict(k)["gated"]["owner"] == "kueue"
    assert workload_dict(v)["gated"]["owner"] == "volcano"
    assert workload_dict(k)["pods_gated"] == workload_dict(v)["pods_gated"] == 2


def test_a_kueue_group_workload_whose_pods_are_gone_is_left_out_and_counted_apart_from_malformed_objects() -> (
    None
):
    """Its pods deleted under it, a group's Workload is not real work: not listed, counted in
    watchtower_objects_left_out_total, not in the malformed objects' counter WatchtowerObjectsUnreadable reads."""
    cfg = SimulatorConfig(
        seed=4, nodes=2, cordoned_nodes=0, arrivals_per_hour=0, teams=["a"], warm_start=False, dra_nodes=0
    )
    sim = SimulatedCluster(cfg)
    sim.form(KueueStandIn).setup(4, [NS])
    sim.submit(bare_pods("k-first", 2, kueue_queue="research", kueue_class="kueue-low"))
    sim.step(1)
    sim.submit(bare_pods("k-held", 2, kueue_queue="research", kueue_class="kueue-low"))
    clock = ManualClock(sim.now())
    c = build_container(Settings(), clock=clock, source_health=sim.feed_health, source_name="test")
    tracker = c.queue_tracker
    sim.drain()
    for kind in KINDS:
        tracker.on_list(kind, [msgspec.Raw(b) for b in sim.list_objects(kind)])
    sim.step(300)
    for kind, type_, b in sim.drain():
        tracker.on_change(kind, type_, b)
    clock.t = sim.now()
    assert "k-held" in {w.key.name for w in tracker.evaluate(clock.now()).snapshot.waiting()}
    held = [b for b in sim.list_objects("Pod") if b"k-held" in b]
    assert held
    for b in held:  # the pods go (deleted by hand); Kueue's Workload for the group stays
        tracker.on_change("Pod", "DELETED", msgspec.Raw(b))
    assert "k-held" not in {w.key.name for w in tracker.evaluate(clock.now()).snapshot.waiting()}
    tracker.evaluate(clock.now() + 60)
    registry = c.metrics.registry
    left_out = {"kind": "KueueWorkload", "reason": "not_real_work"}
    assert registry.get_sample_value("watchtower_objects_left_out_total", left_out) == 1  # said once
    assert (
        registry.get_sample_value("watchtower_malformed_objects_skipped_total", {"kind": "KueueWorkload"})
        is None
    )
