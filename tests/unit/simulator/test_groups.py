"""Gangs and jobs before their pods, as the simulator makes them: the 1.36 Job controller's Workload and
PodGroup, the scheduler holding an incomplete gang with no word, and paddle-operator's PaddleJob status."""

import msgspec

from tests.unit.simulator.helpers import Watched, pods, small
from watchtower.domain.queue import WorkloadState
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator.forms.quota.controller import GPU_KEY
from watchtower.simulator.workloads import paddle_job, single_pod

GANG = WorkloadKey("team-a", "Job", "gang")


def gang_job(gpus: int) -> object:
    return single_pod(
        kind="Job",
        name="gang",
        team="a",
        priority_class="experiment",
        gpus=gpus,
        replicas=4,
        duration=600,
        pod_group=True,
    )


def test_a_gang_one_pod_short_is_held_with_no_condition_and_no_event_and_watchtower_says_so():
    sim = small(2, quota=6)
    w = Watched(sim)
    sim.submit(gang_job(2))
    w.step(120)
    made = pods(sim, "gang-")
    assert len(made) == 3  # the fourth is refused by the quota: 6 GPUs admit three pods of 2
    assert all(p.sched_cond is None and not p.node for p in made)
    assert not w.events("FailedScheduling") and not w.events("Scheduled")
    pod_json = [o for k, t, o in w.changes if k == "Pod"][-1]
    assert pod_json["spec"]["schedulingGroup"] == {"podGroupName": "gang-0"}
    (pg,) = map(msgspec.json.decode, sim.list_objects("PodGroup"))
    assert pg["spec"]["schedulingPolicy"] == {"gang": {"minCount": 4}} and pg["status"] == {}
    (wl,) = map(msgspec.json.decode, sim.list_objects("Workload"))
    assert wl["spec"]["podGroupTemplates"][0]["schedulingPolicy"]["gang"]["minCount"] == 4
    s = w.snapshot().by_key(GANG)
    assert s.state is WorkloadState.PENDING
    assert s.why == "gang incomplete: 3 of minCount 4 pods exist"
    assert (s.source, s.pods_expected, s.pods_existing, s.group) == ("podgroup", 4, 3, "gang-0")

    # An admin raises the quota: the Job controller's next retry makes the fourth, and all four bind at once.
    sim.quotas["team-a"]["status"]["hard"][GPU_KEY] = "8"
    w.step(600)
    made = pods(sim, "gang-")
    assert len(made) == 4 and all(p.node for p in made)
    assert len({p.sched_cond["lastTransitionTime"] for p in made}) == 1
    (pg,) = map(msgspec.json.decode, sim.list_objects("PodGroup"))
    (cond,) = pg["status"]["conditions"]
    assert (cond["type"], cond["status"]) == ("PodGroupScheduled", "True")
    assert w.state.gangs.pod_groups[("team-a", "gang-0")].scheduled
    assert w.snapshot().by_key(GANG) is None  # running: no longer in the queue


def test_a_complete_gang_that_does_not_fit_places_no_pod_and_the_pod_group_carries_the_words():
    sim = small(1)
    w = Watched(sim)
    sim.submit(gang_job(4))  # 16 GPUs on one 8-GPU node
    w.step(60)
    made = pods(sim, "gang-")
    assert len(made) == 4 and not any(p.node for p in made)
    msg = made[0].sched_cond["message"]
    assert msg.startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    (pg,) = map(msgspec.json.decode, sim.list_objects("PodGroup"))
    (cond,) = pg["status"]["conditions"]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodGroupScheduled",
        "False",
        "Unschedulable",
        msg,
    )
    s = w.snapshot().by_key(GANG)
    assert s.state is WorkloadState.PENDING and s.source == "podgroup"
    assert "gang incomplete" not in s.why and s.pods_existing == 4


def test_a_paddlejob_refused_by_quota_has_the_operators_event_and_waits_on_the_quota_it_reads():
    sim = small(1, quota=4)
    w = Watched(sim)
    sim.submit(
        paddle_job(name="pj", team="a", priority_class="batch", workers=2, gpus_per_worker=4, duration=600)
    )
    w.step(60)
    assert [p.name for p in pods(sim, "pj-")] == ["pj-ps-0", "pj-worker-0"]
    ev = w.events("Create")[0]
    assert (ev["message"], ev["type"], ev["involvedObject"]["kind"]) == (
        "create failed Pod pj-worker-1",
        "Warning",
        "PaddleJob",
    )
    assert not w.events("FailedCreate")  # the operator does not write the Job controller's words
    (body,) = map(msgspec.json.decode, sim.list_objects("PaddleJob"))
    assert body["status"]["phase"] == "Pending"
    assert body["status"]["worker"] == {"pending": 1} or body["status"]["worker"] == {"running": 1}
    s = w.snapshot().by_key(WorkloadKey("team-a", "PaddleJob", "pj"))
    assert s.state is WorkloadState.QUOTA_BLOCKED and s.source == "quota"
    assert s.why.startswith(
        "ResourceQuota gpu-quota at its limit: requests.nvidia.com/gpu used 4 + asked 4 > hard 4"
    )


def test_a_paddlejobs_status_follows_its_pods_pending_running_completed_as_the_operator_writes_it():
    sim = small(1)
    w = Watched(sim)
    sim.submit(
        paddle_job(name="pj", team="a", priority_class="batch", workers=2, gpus_per_worker=2, duration=600)
    )

    def status() -> dict:
        (body,) = map(msgspec.json.decode, sim.list_objects("PaddleJob"))
        return body["status"]

    w.step(10)
    assert status()["phase"] == "Pending" and status()["worker"] == {"pending": 2}
    w.step(300)  # bound, images pulled, running
    st = status()
    assert (st["phase"], st["mode"], st["ps"], st["worker"]) == (
        "Running",
        "PS",
        {"running": 1},
        {"running": 2},
    )
    assert "startTime" in st
    key = WorkloadKey("team-a", "PaddleJob", "pj")
    assert w.snapshot().by_key(key) is None  # running: not in the queue
    w.step(900)  # done; its pods are kept a while as Succeeded
    st = status()
    assert st["phase"] == "Completed" and st["worker"] == {"succeeded": 2} and "completionTime" in st
    s = w.snapshot().by_key(key)
    assert s is None  # finished work is not waiting "with no pods created yet"
