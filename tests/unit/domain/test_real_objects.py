"""Objects captured from the real control plane (tests/e2e, kube v1.36.3) through the decoder and the domain.

Each fixture in tests/fixtures/real/ was written by an e2e scenario from what the API server served; these
tests keep the fast suite honest about real wording and shapes without starting a cluster.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures import FIXTURES
from tests.unit.domain.helpers import POLICY
from watchtower.adapters.kube.decoder import ObjectDecoder
from watchtower.domain.disruptions import preemption_from_event, preemption_from_pod
from watchtower.domain.forms.quota.refusals import quota_refusal
from watchtower.domain.messages.scheduler import PreemptionVerdict, parse_scheduling_message
from watchtower.domain.queue import QueueEvaluator, WorkloadState, is_gated
from watchtower.domain.state import ClusterState, PreemptionSeen
from watchtower.domain.workloads import WorkloadKey, workload_of_controller
from watchtower.simulator import objects as o

REAL = FIXTURES / "real"
dec = ObjectDecoder()


def load(name: str) -> Any:
    return json.loads((REAL / f"{name}.json").read_text())


def raw(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def scheduled_message(name: str) -> str:
    pod = load(name)
    return next(c for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")["message"]


# ---- preemption -----------------------------------------------------------------------------------------


def test_real_victim_carries_preemption_by_scheduler_with_its_gpus_and_run_time() -> None:
    obj = load("preemption-victim-terminating")
    pod = dec.decode("Pod", raw(obj))
    p = preemption_from_pod(pod)
    assert p is not None
    assert p.reason == "PreemptionByScheduler"
    assert p.victim_gpus == 2
    assert p.victim_workload == WorkloadKey(pod.namespace, "PaddleJob", "resnet")
    assert pod.deleted_at is not None  # still terminating: it holds its GPUs until the kubelet lets go
    assert pod.holds_resources
    assert p.victim_started is not None and p.at is not None and p.at > p.victim_started
    assert p.gpu_hours_lost == pytest.approx(2 * (p.at - p.victim_started) / 3600)


@pytest.mark.parametrize("fixture", ["preempted-events-core-v1", "preempted-events-events-k8s-io-v1"])
def test_real_preempted_event_names_the_preemptor_by_uid_in_its_message(fixture: str) -> None:
    preemptor = load("preemptor-nominated")
    items = load(fixture)["items"]
    assert len(items) == 2
    for item in items:
        # v1.36 writes no `related` on this event: the message is the only link to the preemptor.
        assert not item.get("related")
        p = preemption_from_event(dec.decode("Event", raw(item)))
        assert p is not None
        assert p.preemptor_uid == preemptor["metadata"]["uid"]
        assert p.node == preemptor["status"]["nominatedNodeName"]


def test_real_victim_and_event_in_any_order_and_replayed_make_one_preemption() -> None:
    victim = raw(load("preemption-victim-terminating"))
    preemptor = raw(load("preemptor-nominated"))
    uid = load("preemption-victim-terminating")["metadata"]["uid"]
    event = next(e for e in load("preempted-events-core-v1")["items"] if e["involvedObject"]["uid"] == uid)
    for order in ((victim, event), (event, victim)):
        st = ClusterState()
        st.upsert_pod(dec.decode("Pod", preemptor))
        seen = []
        for _ in range(2):  # a re-list replays everything
            for obj in order:
                seen += (
                    st.upsert_pod(dec.decode("Pod", obj))
                    if obj is victim
                    else st.upsert_event(dec.decode("Event", raw(obj)))
                )
        assert [h.new for h in seen if isinstance(h, PreemptionSeen)].count(True) == 1
        (p,) = st.ledger.preemptions.values()
        assert p.reason == "PreemptionByScheduler" and p.victim_gpus == 2
        assert p.preemptor_uid == load("preemptor-nominated")["metadata"]["uid"]


def test_real_preemptor_is_bound_where_it_was_nominated_and_its_wait_is_measured() -> None:
    nominated = dec.decode("Pod", raw(load("preemptor-nominated")))
    running = dec.decode("Pod", raw(load("preemptor-running")))
    assert nominated.waiting and nominated.nominated_node
    assert running.node == nominated.nominated_node
    assert running.scheduled_at is not None and running.scheduled_at >= running.created
    assert running.start_time is not None and running.running_since is not None
    st = ClusterState()
    st.upsert_pod(nominated)
    (h,) = [h for h in st.upsert_pod(running) if type(h).__name__ == "PodScheduled"]
    assert h.wait == pytest.approx(running.scheduled_at - running.created)


# ---- the scheduler's words ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fixture", "verdict"),
    [
        ("pod-unschedulable-fragmented", PreemptionVerdict.NO_VICTIMS),
        ("pod-unschedulable-policy-never", PreemptionVerdict.POLICY_NEVER),
        ("pod-unschedulable-not-helpful", PreemptionVerdict.NOT_HELPFUL),
    ],
)
def test_real_scheduler_messages_give_their_preemption_verdict(
    fixture: str, verdict: PreemptionVerdict
) -> None:
    d = parse_scheduling_message(scheduled_message(fixture))
    assert d.recognised and not d.truncated
    assert d.total_nodes == 2
    assert d.preemption is verdict
    assert d.nodes_with(d.reasons[0].reason) == 2


@pytest.mark.parametrize(
    "fixture",
    ["pod-unschedulable-fragmented", "pod-unschedulable-policy-never", "pod-unschedulable-not-helpful"],
)
def test_real_v136_message_reasons_exclude_post_filter_text(fixture: str) -> None:
    d = parse_scheduling_message(scheduled_message(fixture))
    assert [(r.reason, r.nodes) for r in d.reasons] == [("Insufficient nvidia.com/gpu", 2)]


def test_real_fragmented_pod_is_reported_as_fragmentation() -> None:
    st = ClusterState()
    pod = dec.decode("Pod", raw(load("pod-unschedulable-fragmented")))
    st.upsert_pod(pod)
    for item in load("fragmented-nodes-and-fillers")["items"]:
        if item["kind"] == "Node":
            st.upsert_node(dec.decode("Node", raw(item)))
        else:
            st.upsert_pod(dec.decode("Pod", raw(item)))
    snap = QueueEvaluator(POLICY).evaluate(st, now=pod.created + 60)
    (f,) = snap.fragmentation
    assert (f.gpus_requested, f.free_gpus_total, f.largest_free_on_one_node) == (4, 4, 2)


# ---- gates and quota ------------------------------------------------------------------------------------


def test_real_gated_pod_waits_behind_its_named_gate() -> None:
    pod = dec.decode("Pod", raw(load("pod-scheduling-gated")))
    assert pod.scheduling_gated and is_gated(pod) and pod.gates == ("example.com/quota-check",)
    assert pod.scheduled is not None and pod.scheduled.reason == "SchedulingGated"
    st = ClusterState()
    st.upsert_pod(pod)
    snap = QueueEvaluator(POLICY).evaluate(st, now=pod.created + 7200)
    (w,) = snap.workloads
    # Issue 30: a gate no known system owns holds waiting work, alerted at its tier's thresholds.
    assert w.state is WorkloadState.PENDING and w.severity == "critical" and w.wait_seconds == 7200
    assert w.why == "held by scheduling gate example.com/quota-check since 2026-11-29T23:20:56Z"
    assert snap.gated_pods == 1


def test_real_failedcreate_event_is_a_quota_refusal_of_the_job() -> None:
    ev = dec.decode("Event", raw(load("failedcreate-quota-event")))
    q = quota_refusal(ev)
    assert q is not None
    assert q.workload == WorkloadKey("e2e-quota", "Job", "sweep")
    assert q.quota == "gpu-quota"
    assert q.gpus_requested == 4
    assert q.limited == {"requests.nvidia.com/gpu": "2"}
    assert q.pod_name.startswith("sweep-")
    assert ev.source == "job-controller"


def test_real_resource_quota_status_gives_hard_and_used_gpus() -> None:
    q = dec.decode("ResourceQuota", raw(load("resourcequota-gpu")))
    assert (q.namespace, q.name, q.hard_gpus, q.used_gpus) == ("e2e-quota", "gpu-quota", 2, 0)


# ---- the controllers behind quota refusals (DESIGN §3.15) -----------------------------------------------


def test_real_job_is_read_as_the_pods_its_template_would_make() -> None:
    c = dec.decode("Job", raw(load("job-refused-by-quota")))
    assert (c.namespace, c.kind, c.name, c.owner) == ("e2e-quota", "Job", "sweep", None)
    assert (c.priority_class, c.priority, c.gpus_per_pod, c.gpus, c.pods) == ("experiment", None, 4, 4, 1)


def test_real_replicaset_is_its_deployments() -> None:
    c = dec.decode("ReplicaSet", raw(load("replicaset-of-deployment")))
    assert c.owner is not None and (c.owner.kind, c.owner.name) == ("Deployment", "serve")
    assert (c.kind, c.priority_class, c.gpus_per_pod, c.gpus, c.pods) == (
        "ReplicaSet",
        "online-serving",
        4,
        4,
        1,
    )
    assert workload_of_controller(c) == WorkloadKey("e2e-quota", "Deployment", "serve")


def test_real_refusals_are_tiered_by_their_controllers_templates() -> None:
    """The Job's class is experiment (medium), the Deployment's online-serving (high): not priority 0."""
    st = ClusterState()
    for name, value in (("experiment", 500_000), ("online-serving", 900_000)):
        st.upsert_priority_class(dec.decode("PriorityClass", raw(o.priority_class(name, value))))
    st.control.upsert_controller(dec.decode("Job", raw(load("job-refused-by-quota"))))
    st.control.upsert_controller(dec.decode("ReplicaSet", raw(load("replicaset-of-deployment"))))
    ev = dec.decode("Event", raw(load("failedcreate-quota-event")))
    st.upsert_event(ev)
    st.upsert_event(dec.decode("Event", raw(load("replicaset-failedcreate-quota-event"))))
    assert ev.last is not None
    snap = QueueEvaluator(POLICY).evaluate(st, now=ev.last + 60)
    got = {(w.key.kind, w.key.name): (w.state, w.tier, w.gpus_requested) for w in snap.workloads}
    assert got == {
        ("Job", "sweep"): (WorkloadState.QUOTA_BLOCKED, "medium", 4),
        ("Deployment", "serve"): (WorkloadState.QUOTA_BLOCKED, "high", 4),
    }
