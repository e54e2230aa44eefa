"""The simulated cluster end to end: its objects go through the real decoder, Ingestor, ClusterState and
QueueEvaluator, and must show what kube-scheduler and the controllers really do (DESIGN §3)."""

from collections import Counter

import msgspec

from tests.unit.simulator.helpers import Watched, one, pods, small
from watchtower.adapters.kube.decoder import ObjectDecoder, parse_time
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig
from watchtower.domain.messages.scheduler import PreemptionVerdict, parse_scheduling_message
from watchtower.domain.queue import WorkloadState
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator.cluster import KINDS
from watchtower.simulator.workloads import paddle_job, single_pod


def test_the_higher_priority_pod_gets_the_freed_gpus_first():
    sim = small(1)
    w = Watched(sim)
    sim.submit(
        single_pod(kind="Pod", name="debug", team="a", priority_class="urgent-debug", gpus=8, duration=600)
    )
    w.step(30)
    sim.submit(single_pod(kind="Job", name="etl", team="a", priority_class="batch", gpus=8, duration=600))
    w.step(30)
    sim.submit(
        single_pod(kind="Pod", name="exp", team="b", priority_class="experiment", gpus=8, duration=600)
    )
    w.step(30)
    assert not pods(sim, "exp")[0].node and not pods(sim, "etl")[0].node
    w.step(1200)  # the debug pod pulls its image, runs 10 minutes and succeeds
    assert pods(sim, "debug")[0].phase == "Succeeded"
    assert pods(sim, "exp")[0].node == "gpu-node-000"
    assert not pods(sim, "etl")[0].node


def test_preemption_evicts_the_lowest_tier_and_marks_victim_and_preemptor_as_the_api_does():
    sim = small(2)
    w = Watched(sim)
    sim.submit(
        single_pod(kind="Job", name="long", team="a", priority_class="long-training", gpus=8, duration=1e6)
    )
    sim.submit(single_pod(kind="Job", name="cheap", team="a", priority_class="batch", gpus=8, duration=1e6))
    w.step(300)
    victim, spared = pods(sim, "cheap")[0], pods(sim, "long")[0]
    assert victim.node and spared.node and victim.node != spared.node
    sim.submit(
        single_pod(kind="Pod", name="debug", team="b", priority_class="urgent-debug", gpus=8, duration=600)
    )
    w.step(10)
    debug = pods(sim, "debug")[0]
    assert debug.nominated == victim.node and not debug.node
    assert victim.disruption is not None and victim.disruption["reason"] == "PreemptionByScheduler"
    assert spared.disruption is None
    pod_json = [o for k, t, o in w.changes if k == "Pod" and o["metadata"]["uid"] == victim.uid][-1]
    assert (
        pod_json["metadata"]["deletionTimestamp"] and pod_json["metadata"]["deletionGracePeriodSeconds"] == 30
    )
    ev = one(w.events("Preempted"))
    assert ev["message"] == f"Preempted by pod {debug.uid} on node {victim.node}"
    assert ev["related"]["uid"] == debug.uid and ev["involvedObject"]["uid"] == victim.uid
    p = w.state.ledger.preemptions[victim.uid]
    assert p.preemptor_uid == debug.uid and p.reason == "PreemptionByScheduler" and p.victim_gpus == 8
    w.step(60)
    assert victim.uid not in sim.pods
    assert debug.node == victim.node and debug.sched_cond["status"] == "True"
    # The Job controller replaces its pod; the replacement queues behind the debug pod.
    replacement = [p for p in pods(sim, "cheap") if p.uid != victim.uid]
    assert len(replacement) == 1 and not replacement[0].node


def test_terminating_victims_keep_holding_gpus_until_they_are_gone():
    sim = small(1)
    w = Watched(sim)
    sim.submit(
        paddle_job(name="pt", team="a", priority_class="batch", workers=1, gpus_per_worker=8, duration=1e6)
    )
    w.step(300)
    worker = pods(sim, "pt-worker-0")[0]
    sim.submit(
        single_pod(kind="Pod", name="debug", team="b", priority_class="urgent-debug", gpus=8, duration=600)
    )
    w.step(10)
    assert worker.terminating and worker.gone_at - sim.now() > 60  # training checkpoints for minutes
    assert w.state.gpus_used == {"gpu-node-000": 8}
    w.step(60)
    debug = pods(sim, "debug")[0]
    assert not debug.node and debug.nominated == "gpu-node-000"
    diag = parse_scheduling_message(debug.sched_cond["message"])
    assert diag.recognised and "terminating pod on the nominated node" in diag.preemption_text
    status = w.snapshot().by_key(WorkloadKey("team-b", "Pod", "debug"))
    assert status.state is WorkloadState.PENDING and status.preemption is PreemptionVerdict.POSSIBLE
    w.step(600)
    assert worker.uid not in sim.pods and debug.node == "gpu-node-000"
    # PaddleJob recreates the pod under the same name with a new uid.
    again = one(pods(sim, "pt-worker-0"))
    assert again.uid != worker.uid


def test_preemption_policy_never_waits_with_the_not_eligible_message():
    sim = small(1)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="cheap", team="a", priority_class="batch", gpus=8, duration=1e6))
    w.step(60)
    sim.submit(
        single_pod(kind="Job", name="long", team="b", priority_class="long-training", gpus=8, duration=1e6)
    )
    w.step(600)
    long_pod = pods(sim, "long")[0]
    assert not long_pod.node and not long_pod.nominated
    assert pods(sim, "cheap")[0].disruption is None
    assert long_pod.sched_cond["message"] == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    assert not w.events("Preempted")
    status = w.snapshot().by_key(WorkloadKey("team-b", "Job", "long"))
    assert status.preemption is PreemptionVerdict.POLICY_NEVER and status.tier == "low"


def test_unschedulable_condition_keeps_its_first_transition_time_while_the_message_changes():
    sim = small(2)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="a", team="a", priority_class="experiment", gpus=8, duration=1e6))
    sim.submit(single_pod(kind="Job", name="b", team="a", priority_class="experiment", gpus=6, duration=1e6))
    w.step(60)
    sim.submit(single_pod(kind="Job", name="c", team="b", priority_class="batch", gpus=4, duration=1e6))
    w.step(60)
    c = pods(sim, "c")[0]
    first = c.sched_cond["lastTransitionTime"]
    msg1 = c.sched_cond["message"]
    sim.nodes["gpu-node-001"]["spec"]["unschedulable"] = True  # as `kubectl cordon` would
    w.step(60)
    assert c.sched_cond["message"] != msg1
    assert c.sched_cond["lastTransitionTime"] == first
    assert w.state.pods[c.uid].scheduled.since == parse_time(first)


def test_a_pod_over_quota_never_exists_and_its_controller_reports_failed_create():
    sim = small(1, quota=8)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="first", team="a", priority_class="batch", gpus=8, duration=1200))
    w.step(30)
    sim.submit(single_pod(kind="Job", name="second", team="a", priority_class="batch", gpus=2, duration=60))
    w.step(30)
    assert not pods(sim, "second")
    ev = w.events("FailedCreate")[0]
    assert ev["message"] == (
        'Error creating: pods "second-" is forbidden: exceeded quota: gpu-quota, '
        "requested: requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=8, limited: requests.nvidia.com/gpu=8"
    )
    assert ev["involvedObject"]["kind"] == "Job" and ev["type"] == "Warning"
    status = w.snapshot().by_key(WorkloadKey("team-a", "Job", "second"))
    assert status.state is WorkloadState.QUOTA_BLOCKED and status.gpus_per_pod == 2
    w.step(600)
    counts = [o["count"] for k, t, o in w.changes if k == "Event" and o["reason"] == "FailedCreate"]
    assert counts[-1] > 1  # retried with back-off, folded into the same event
    retries = len(counts)
    assert retries < 600 / 10  # back-off: fewer retries than one per tick
    w.step(1800)  # the first job ends; the second is created at its next retry
    assert pods(sim, "second")


def test_a_serving_deployment_over_quota_waits_as_the_deployment_in_the_high_tier():
    """Its pods never exist: the simulator serves the ReplicaSet, whose template gives the tier."""
    sim = small(1, quota=8)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="hog", team="a", priority_class="batch", gpus=8, duration=1e6))
    w.step(30)
    serve = sim.generator.serving(team="a", replicas=2, gpus=2)
    sim.submit(serve)
    w.step(30)
    deployment = serve.name.rsplit("-", 1)[0]  # serve-0001-7d9f8b6c5 → serve-0001
    ev = w.events("FailedCreate")[0]
    assert (ev["involvedObject"]["kind"], ev["involvedObject"]["name"]) == ("ReplicaSet", serve.name)
    (s,) = [x for x in w.snapshot().waiting() if x.state is WorkloadState.QUOTA_BLOCKED]
    assert s.key == WorkloadKey("team-a", "Deployment", deployment)
    assert (s.tier, s.priority_class, s.gpus_requested, s.gpus_per_pod) == ("high", "online-serving", 4, 2)
    w.step(15 * 60)
    assert w.snapshot().by_key(s.key).severity == "warning"  # the high tier's 15 minutes, not 2 hours


def test_the_controllers_are_served_while_their_work_lasts_then_deleted():
    sim = small(1)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="etl", team="a", priority_class="batch", gpus=1, duration=60))
    sim.submit(
        paddle_job(name="llm", team="b", priority_class="batch", workers=2, gpus_per_worker=2, duration=60)
    )
    w.step(10)
    assert [o["metadata"]["name"] for o in map(msgspec.json.decode, sim.list_objects("Job"))] == ["etl"]
    pj = w.state.control.controller(WorkloadKey("team-b", "PaddleJob", "llm"))
    assert pj is not None and (pj.pods, pj.gpus, pj.gpus_per_pod) == (3, 4, 2)  # a ps and two workers
    w.step(3 * 3600)
    assert sim.list_objects("Job") == [] and sim.list_objects("PaddleJob") == []
    assert not any(w.state.control.controllers.values())


def test_quota_used_is_published_on_the_resource_quota():
    sim = small(1, quota=16)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="x", team="a", priority_class="batch", gpus=3, duration=1e6))
    w.step(30)
    q = w.state.control.quotas[("team-a", "gpu-quota")]
    assert (q.hard_gpus, q.used_gpus) == (16, 3)


def test_gangs_are_scheduled_pod_by_pod_so_partial_gangs_happen():
    sim = small(1)
    w = Watched(sim)
    sim.submit(
        paddle_job(
            name="big", team="a", priority_class="long-training", workers=3, gpus_per_worker=4, duration=1e6
        )
    )
    w.step(60)
    names = [p.name for p in pods(sim, "big")]
    assert names == ["big-ps-0", "big-worker-0", "big-worker-1", "big-worker-2"]
    ps = pods(sim, "big-ps")[0]
    assert ps.gpus == 0 and ps.labels["paddle-res-name"] == "big-ps-0"
    assert ps.owner["apiVersion"] == "batch.paddlepaddle.org/v1" and ps.owner["kind"] == "PaddleJob"
    status = w.snapshot().by_key(WorkloadKey("team-a", "PaddleJob", "big"))
    assert status.state is WorkloadState.PARTIAL
    assert (status.pods_running, status.pods_pending, status.gpus_held) == (2, 1, 8)


def test_pods_start_after_an_image_pull_and_finished_pods_are_deleted_later():
    sim = small(1)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="j", team="a", priority_class="batch", gpus=1, duration=300))
    w.step(10)
    p = pods(sim, "j")[0]
    assert p.node and p.start_time is not None and p.running_since is None
    w.step(200)
    assert p.running_since is not None and p.running_since - p.start_time >= 19
    started = [h for h in w.state.pods.values() if h.uid == p.uid][0]
    assert started.running_since is not None
    w.step(400)
    assert p.phase == "Succeeded"
    w.step(1000)
    assert p.uid not in sim.pods
    assert [t for k, t, o in w.changes if k == "Pod" and o["metadata"]["uid"] == p.uid][-1] == "DELETED"


def test_every_change_has_a_fresh_resource_version_and_decodes():
    sim = demo_cluster(SimulatorConfig(seed=11))
    w = Watched(sim)
    w.step(3600)
    rvs = [int(o["metadata"]["resourceVersion"]) for _, _, o in w.changes]
    assert rvs == sorted(rvs) and len(set(rvs)) == len(rvs)
    assert sum(w.ingest.skipped.values()) == 0
    kinds = Counter((k, t) for k, t, _ in w.changes)
    assert kinds[("Pod", "ADDED")] and kinds[("Pod", "DELETED")] and kinds[("Event", "DELETED")]
    dec = ObjectDecoder()
    for kind in KINDS:
        for raw in sim.list_objects(kind):
            dec.head(msgspec.Raw(raw))


def test_every_scheduler_message_follows_the_real_grammar():
    sim = demo_cluster(SimulatorConfig(seed=5))
    w = Watched(sim)
    w.step(2 * 3600)
    # kube-scheduler's grammar and Volcano's (the story's PaddleJob): both are read.
    messages = {o["message"] for o in w.events("FailedScheduling")}
    # A gated pod's SchedulingGated condition is the API server's, not a scheduler's: not in its grammar.
    messages |= {
        c["message"]
        for k, _, o in w.changes
        if k == "Pod"
        for c in o["status"].get("conditions", ())
        if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("reason") != "SchedulingGated"
    }
    assert len(messages) >= 3
    assert any("pod group is not ready" in m for m in messages)  # Volcano's pods and events are among them
    verdicts = set()
    for m in messages:
        d = parse_scheduling_message(m)
        assert d.recognised, m
        assert all(r.reason != "other" for r in d.reasons), m
        verdicts.add(d.preemption)
    assert {PreemptionVerdict.POLICY_NEVER, PreemptionVerdict.NO_VICTIMS} <= verdicts


def test_the_same_seed_gives_the_same_cluster_and_another_seed_another():
    def run(seed: int) -> list[tuple[str, str, bytes]]:
        sim = demo_cluster(SimulatorConfig(seed=seed))
        sim.step(1800)
        return [(k, "LIST", b) for k in KINDS for b in sim.list_objects(k)] + sim.drain()

    assert run(4) == run(4)
    assert run(4) != run(5)


def test_the_warm_start_shows_every_tier_waiting_preemptions_a_partial_gang_and_a_quota_refusal():
    for seed in (1, 7, 42):
        sim = demo_cluster(SimulatorConfig(seed=seed))
        w = Watched(sim)
        w.step(60)  # one real second of the demo at the default speed
        snap = w.snapshot()
        waiting = snap.waiting()
        assert {s.tier for s in waiting} == {"critical", "high", "medium", "low"}, seed
        assert snap.preemptions, seed
        assert any(s.state is WorkloadState.PARTIAL and s.gang for s in waiting), seed
        assert any(s.state is WorkloadState.QUOTA_BLOCKED for s in waiting), seed
        assert any(s.preemption is PreemptionVerdict.POLICY_NEVER for s in waiting), seed


def test_a_job_refused_by_quota_for_hours_is_given_up_and_stops_retrying():
    sim = small(1, quota=8)
    w = Watched(sim)
    sim.submit(single_pod(kind="Job", name="hog", team="a", priority_class="batch", gpus=8, duration=1e6))
    sim.submit(single_pod(kind="Job", name="late", team="a", priority_class="batch", gpus=1, duration=60))
    w.step(3 * 3600)
    n = len(w.events("FailedCreate"))
    w.step(3600)
    assert len(w.events("FailedCreate")) == n
    assert not pods(sim, "late")
