"""Volcano's PodGroup and Queue and a JobSet/TrainJob in the simulator, read back as the service reads them.

The shapes and words are vc-scheduler's and paddle-operator's (watchtower/simulator/forms/gangs/
volcano_objects.py)."""

from __future__ import annotations

import pytest

from tests.unit.simulator.helpers import Watched, pods, small
from watchtower.commands.demo.story import JOBSET_NAME, TRAINJOB_NAME, VOLCANO_JOB, VOLCANO_QUEUE
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig
from watchtower.domain.queue import WorkloadState
from watchtower.simulator.forms.gangs import volcano_objects as vo
from watchtower.simulator.forms.gangs.controller import Gangs
from watchtower.simulator.workloads import paddle_job

GANG_HEAD = "4/4 tasks in gang unschedulable: pod group is not ready, 4 Pending, 4 minAvailable; Pending: 4 Unschedulable"


@pytest.mark.parametrize("seed", [7, 1, 42])
def test_within_the_first_minutes_a_volcano_paddlejob_and_two_jobsets_wait_each_as_one_workload(
    seed: int,
) -> None:
    w = Watched(demo_cluster(SimulatorConfig(seed=seed)))
    seen: dict[str, set[tuple[str, str, str, str]]] = {}
    for _minute in range(16):
        w.step(60)
        for s in w.snapshot().waiting():
            if s.key.name in (VOLCANO_JOB, JOBSET_NAME, TRAINJOB_NAME) or s.key.name.startswith(JOBSET_NAME):
                seen.setdefault(s.key.name, set()).add((s.kind, s.state.value, s.source, s.why))
    assert set(seen) == {VOLCANO_JOB, JOBSET_NAME, TRAINJOB_NAME}  # no workload per child Job
    volcano = seen[VOLCANO_JOB]
    assert (
        "PaddleJob",
        "pending",
        "volcano-podgroup",
        f"Volcano PodGroup {VOLCANO_JOB} is Pending in queue {VOLCANO_QUEUE}",
    ) in volcano
    # Let into its queue, its pods made by the operator do not all fit: Volcano's Origin task says why.
    assert any(why.startswith("no node fits (12 tried)") for _, _, _, why in volcano), volcano
    assert {(k, st, src) for k, st, src, _ in seen[JOBSET_NAME]} == {("JobSet", "pending", "pods")}
    assert {(k, st, src) for k, st, src, _ in seen[TRAINJOB_NAME]} == {("TrainJob", "pending", "pods")}
    group = next(
        o
        for k, t, o in reversed(w.changes)
        if k == "VolcanoPodGroup" and o["metadata"]["name"] == VOLCANO_JOB
    )
    (cond,) = group["status"]["conditions"]
    assert (group["status"]["phase"], cond["type"], cond["reason"]) == (
        "Inqueue",
        "Unschedulable",
        "NotEnoughResources",
    )
    assert cond["message"].startswith(
        GANG_HEAD + ". Origin reason is ocr-train-worker-0: 0/12 nodes are unavailable:"
    )
    made = pods(w.sim, f"{VOLCANO_JOB}-worker-")
    assert len(made) == 4 and all(p.scheduler == "volcano" and p.node == "" for p in made)
    js_pods = [p for p in w.sim.pods.values() if p.name.startswith(JOBSET_NAME)]
    assert {p.labels["jobset.sigs.k8s.io/jobset-name"] for p in js_pods} == {JOBSET_NAME} and len(
        js_pods
    ) == 4
    assert {p.owner["name"] for p in js_pods} == {f"{JOBSET_NAME}-driver-0", f"{JOBSET_NAME}-workers-0"}


def test_a_volcano_group_waits_pending_without_pods_until_its_queue_has_room_then_runs_together() -> None:
    sim = small(nodes=2)
    volcano = sim.form(Gangs).volcano
    volcano.add_queue("team-q", weight=1, capability_gpus=4, deserved_gpus=4, guarantee_gpus=0)
    w = Watched(sim)
    sim.submit(
        paddle_job(
            name="rank",
            team="a",
            priority_class="experiment",
            workers=4,
            gpus_per_worker=2,
            duration=3600,
            volcano_queue="team-q",
        )
    )
    w.step(30)
    (s,) = w.snapshot().waiting()
    assert (s.kind, s.state, s.source) == ("PaddleJob", WorkloadState.PENDING, "volcano-podgroup")
    assert s.why == "Volcano PodGroup rank is Pending in queue team-q"
    assert not pods(sim, "rank-") and [e["message"] for e in w.events("Unschedulable")] == [vo.QUEUE_FULL]
    volcano.queues["team-q"]["spec"]["capability"][vo.GPU] = "8"  # an admin raises the queue's capability
    w.step(120)
    made = pods(sim, "rank-worker-")
    assert len(made) == 4 and all(p.node for p in made)
    body = orjson_last(w, "Pod", made[0].name)
    assert body["spec"]["schedulerName"] == "volcano"
    assert body["metadata"]["annotations"]["scheduling.k8s.io/group-name"] == "rank"
    group = orjson_last(w, "VolcanoPodGroup", "rank")
    assert group["status"]["phase"] == "Running"
    assert group["status"]["conditions"][0]["reason"] == vo.READY_REASON
    assert orjson_last(w, "VolcanoQueue", "team-q")["status"]["allocated"][vo.GPU] == "8"
    assert not [s for s in w.snapshot().waiting() if s.key.name == "rank"]


def orjson_last(w: Watched, kind: str, name: str) -> dict:
    return next(o for k, _, o in reversed(w.changes) if k == kind and o["metadata"]["name"] == name)
