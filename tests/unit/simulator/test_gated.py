"""Scheduling gates in the simulator (issue 30 part 1): kube-scheduler leaves a gated pod alone and schedules it
once its gates are removed; a Kueue plain-pod group is gated until Kueue admits its Workload; bare pods in a
Volcano queue are gated until the queue has room. Shapes from upstream (sources in
watchtower/simulator/forms/gated/objects.py): the API server's condition as tests/fixtures/real/
pod-scheduling-gated.json captured it, Kueue's KEP-976 plain pods, Volcano's scheduling-gates-queue-admission.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import orjson

from tests.fixtures import FIXTURES
from tests.unit.simulator.helpers import Watched, small
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator.cluster import SimulatedCluster
from watchtower.simulator.forms.gangs.controller import Gangs
from watchtower.simulator.forms.kueue.controller import KueueStandIn
from watchtower.simulator.pods import SimPod
from watchtower.simulator.workloads import WorkloadSpec, single_pod

KUEUE_GATE = "kueue.x-k8s.io/admission"
VOLCANO_GATE = "scheduling.volcano.sh/queue-allocation-gate"
NS = "team-a"


def bare_pods(name: str, *, gpus: int, replicas: int = 2, **kw: Any) -> WorkloadSpec:
    spec = single_pod(
        kind="Job",
        name=name,
        team="a",
        priority_class="experiment",
        gpus=gpus,
        replicas=replicas,
        duration=600,
    )
    return replace(spec, kind="Pod", **kw)


def kueue_group(name: str, *, gpus: int = 2) -> WorkloadSpec:
    return bare_pods(name, gpus=gpus, kueue_queue="research", kueue_class="kueue-low")


def with_kueue(nominal: int, **kw: Any) -> SimulatedCluster:
    sim = small(1, **kw)
    sim.form(KueueStandIn).setup(nominal, [NS])
    return sim


def pods_of(sim: SimulatedCluster, prefix: str) -> list[SimPod]:
    return sorted((p for p in sim.pods.values() if p.name.startswith(prefix)), key=lambda p: p.name)


def rendered(sim: SimulatedCluster, p: SimPod) -> dict[str, Any]:
    out: dict[str, Any] = orjson.loads(sim.store.render(p))
    return out


def test_a_gated_pod_is_not_scheduled_and_removing_its_gate_schedules_it() -> None:
    sim = with_kueue(0)  # a ClusterQueue with no quota: Kueue never admits the group
    sim.submit(kueue_group("held"))
    sim.step(600)
    pods = pods_of(sim, "held-")
    assert len(pods) == 2 and all(p.gates == (KUEUE_GATE,) and not p.node for p in pods)
    body = rendered(sim, pods[0])
    captured = json.loads((FIXTURES / "real" / "pod-scheduling-gated.json").read_text())
    assert body["spec"]["schedulingGates"] == [{"name": KUEUE_GATE}]
    (cond,) = body["status"]["conditions"]
    (want,) = captured["status"]["conditions"]
    assert {k: v for k, v in cond.items() if k != "lastTransitionTime"} == {
        k: v for k, v in want.items() if k != "lastTransitionTime"
    }
    assert body["status"]["phase"] == "Pending"
    sim.drain()
    sim.store.ungate(pods[0], KUEUE_GATE)  # an update of the pod
    assert [(k, t) for k, t, _ in sim.drain()] == [("Pod", "MODIFIED")]
    assert "schedulingGates" not in rendered(sim, pods[0])["spec"]
    sim.step(10)
    assert pods[0].node and pods[0].sched_cond is not None and pods[0].sched_cond["status"] == "True"
    assert not pods[1].node


def test_a_kueue_plain_pod_group_gets_one_workload_and_is_ungated_when_admitted() -> None:
    sim = with_kueue(4)
    sim.submit(kueue_group("first"))
    w = Watched(sim)
    w.step(1)
    sim.submit(kueue_group("second"))  # later: behind the first in Kueue's queue (BestEffortFIFO)
    w.step(9)
    first, second = pods_of(sim, "first-"), pods_of(sim, "second-")
    labels = first[0].labels
    assert (
        labels["kueue.x-k8s.io/pod-group-name"] == "first"
        and labels["kueue.x-k8s.io/queue-name"] == "research"
    )
    assert first[0].annotations == {"kueue.x-k8s.io/pod-group-total-count": "2"}
    workloads = {o["metadata"]["name"]: o for k, t, o in w.changes if k == "KueueWorkload" and t == "ADDED"}
    wl = workloads["first"]
    assert wl["metadata"]["annotations"] == {"kueue.x-k8s.io/is-group-workload": "true"}
    assert [r["name"] for r in wl["metadata"]["ownerReferences"]] == ["first-0", "first-1"]
    assert not any(r.get("controller") for r in wl["metadata"]["ownerReferences"])
    assert wl["spec"]["podSets"][0]["count"] == 2 and len(wl["spec"]["podSets"][0]["name"]) == 8
    w.step(30)
    # The first fits the ClusterQueue's 4 GPUs: admitted, ungated and bound; the second waits gated.
    assert all(not p.gates and p.node for p in first)
    assert all(p.gates == (KUEUE_GATE,) and not p.node for p in second)
    snap = w.snapshot()
    (held,) = [s for s in snap.waiting() if s.key.name == "second"]
    assert held.key == WorkloadKey(NS, "KueueWorkload", "second") and held.pods_gated == 2
    assert held.why.startswith("held by Kueue: waiting for quota in ClusterQueue research-cq")
    w.step(900)  # the first runs its 10 minutes and is gone: its quota goes to the second
    assert all(not p.gates and p.node for p in pods_of(sim, "second-"))


def test_bare_pods_in_a_volcano_queue_are_ungated_when_the_queue_has_room() -> None:
    sim = small(2)
    sim.form(Gangs).volcano.add_queue("vision-q", capability_gpus=4)
    sim.submit(bare_pods("ocr", gpus=2, volcano_queue="vision-q"))
    w = Watched(sim)
    w.step(1)
    sim.submit(bare_pods("det", gpus=2, volcano_queue="vision-q"))
    w.step(9)
    ocr, det = pods_of(sim, "ocr-"), pods_of(sim, "det-")
    assert len(ocr) == len(det) == 2
    added = [o for k, t, o in w.changes if k == "Pod" and t == "ADDED"]
    assert len(added) == 4 and all(o["spec"]["schedulingGates"] == [{"name": VOLCANO_GATE}] for o in added)
    assert ocr[0].annotations == {"scheduling.k8s.io/group-name": "ocr", VOLCANO_GATE: "true"}
    assert ocr[0].scheduler == "volcano"
    groups = {o["metadata"]["name"]: o for k, t, o in w.changes if k == "VolcanoPodGroup" and t == "ADDED"}
    assert "ownerReferences" not in groups["ocr"]["metadata"]
    w.step(120)
    # The queue holds 4 GPUs: the first group is let in, ungated and bound; the second stays gated.
    assert all(not p.gates and p.node for p in ocr)
    assert all(p.gates == (VOLCANO_GATE,) and not p.node for p in det)
    (held,) = [s for s in w.snapshot().waiting() if s.key.name == "det"]
    assert held.key == WorkloadKey(NS, "PodGroup", "det") and held.pods_gated == 2
    assert held.why.startswith("held by Volcano queue vision-q")
    w.step(900)
    assert all(not p.gates and p.node for p in pods_of(sim, "det-"))


def test_a_seeded_cluster_with_gated_groups_plays_the_same_twice() -> None:
    def feed() -> list[tuple[str, str, bytes]]:
        sim = with_kueue(4, seed=11)
        sim.form(Gangs).volcano.add_queue("vision-q", capability_gpus=4)
        sim.submit(kueue_group("k1"))
        sim.submit(kueue_group("k2"))
        sim.submit(bare_pods("v1", gpus=2, volcano_queue="vision-q"))
        sim.submit(bare_pods("v2", gpus=2, volcano_queue="vision-q"))
        out = []
        for _ in range(40):
            sim.step(60)
            out += sim.drain()
        return out

    first = feed()
    assert first == feed()
    assert any(k == "KueueWorkload" for k, _, _ in first)
