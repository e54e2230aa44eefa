"""ResourceQuota refusals: work that never became a pod (DESIGN §3.9)."""

from __future__ import annotations

import pytest

from tests.unit.domain.helpers import NS, T0, apply, evaluate, paddle_owner, running_pod, state_of
from watchtower.domain.queue import WorkloadState
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o

REFUSAL = (
    'Error creating: pods "llm-worker-0" is forbidden: exceeded quota: gpu-quota, '
    "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=40, limited: requests.nvidia.com/gpu=40"
)


def failed_create(
    at: float,
    last: float,
    count: int = 5,
    kind: str = "PaddleJob",
    name: str = "llm",
    api_version: str = o.PADDLE_API,
):
    return o.core_event(
        namespace=NS,
        reason="FailedCreate",
        message=REFUSAL,
        type_="Warning",
        component="paddle-operator",
        involved={
            "kind": kind,
            "namespace": NS,
            "name": name,
            "uid": o.new_uid(name),
            "apiVersion": api_version,
        },
        at=at,
        last=last,
        count=count,
    )


def test_failed_create_exceeded_quota_makes_a_quota_blocked_workload_without_pods():
    state = state_of(
        o.resource_quota(NS, "gpu-quota", hard_gpus=40, used_gpus=40), failed_create(T0, T0 + 600)
    )
    w = evaluate(state, T0 + 700).by_key(WorkloadKey(NS, "PaddleJob", "llm"))
    assert w.state is WorkloadState.QUOTA_BLOCKED and w.waiting
    assert (w.pods_pending, w.pods_running, w.gpus_requested, w.wait_seconds) == (0, 0, 8, 700)
    assert w.quota is not None and w.quota.quota == "gpu-quota"
    assert w.quota.used == {"requests.nvidia.com/gpu": "40"}
    assert "gpu-quota" in w.why


def test_a_refusal_older_than_the_window_no_longer_blocks():
    state = state_of(failed_create(T0, T0 + 60))
    assert evaluate(state, T0 + 60 + 16 * 60).workloads == ()


def test_a_refusal_followed_by_the_pods_being_created_is_history():
    state = state_of(o.node("gpu-1"), failed_create(T0, T0 + 60))
    apply(state, running_pod("llm-worker-0", "gpu-1", created=T0 + 120, gpus=8, owner=paddle_owner("llm")))
    snap = evaluate(state, T0 + 200, include_running=True)
    assert snap.by_key(WorkloadKey(NS, "PaddleJob", "llm")).state is WorkloadState.RUNNING


def test_a_gang_with_some_pods_created_and_the_rest_refused_is_quota_blocked():
    state = state_of(o.node("gpu-1"))
    apply(state, running_pod("llm-worker-1", "gpu-1", created=T0, gpus=8, owner=paddle_owner("llm")))
    apply(state, failed_create(T0 + 1, T0 + 300))
    w = evaluate(state, T0 + 400).by_key(WorkloadKey(NS, "PaddleJob", "llm"))
    assert w.state is WorkloadState.QUOTA_BLOCKED
    assert (w.pods_running, w.gpus_held) == (1, 8)


def test_other_failed_create_events_are_not_quota_refusals():
    ev = failed_create(T0, T0 + 10)
    ev["message"] = (
        'Error creating: pods "llm-worker-0" is forbidden: error looking up service account vision/x'
    )
    state = state_of(ev)
    assert state.control.quota_refusals == {}


def test_repeated_refusal_events_keep_the_first_time():
    state = state_of(failed_create(T0, T0 + 60), failed_create(T0 + 30, T0 + 600, count=9))
    q = state.control.quota_refusals[WorkloadKey(NS, "PaddleJob", "llm")]
    assert (q.first, q.last, q.count) == (T0, T0 + 600, 9)


VOLCANO_API = "batch.volcano.sh/v1alpha1"


def test_a_volcano_job_refused_by_quota_is_the_workload_its_pods_belong_to():
    """Volcano names its job kind `Job`: the event's apiVersion keeps it apart from a batch/v1 Job."""
    state = state_of(
        o.node("gpu-1"), failed_create(T0, T0 + 60, kind="Job", name="sweep", api_version=VOLCANO_API)
    )
    key = WorkloadKey(NS, "VolcanoJob", "sweep")
    assert evaluate(state, T0 + 100).by_key(key).state is WorkloadState.QUOTA_BLOCKED
    owner = o.owner_ref("Job", "sweep", api_version=VOLCANO_API, uid=o.new_uid("vj/sweep"))
    apply(state, running_pod("sweep-worker-0", "gpu-1", created=T0 + 120, gpus=8, owner=owner))
    snap = evaluate(state, T0 + 200, include_running=True)
    assert snap.by_key(key).state is WorkloadState.RUNNING
    assert [w.key for w in snap.workloads] == [key]


def test_a_batch_job_refused_by_quota_stays_a_job():
    state = state_of(failed_create(T0, T0 + 60, kind="Job", name="etl", api_version="batch/v1"))
    assert (
        evaluate(state, T0 + 100).by_key(WorkloadKey(NS, "Job", "etl")).state is WorkloadState.QUOTA_BLOCKED
    )


# ---- the refused work read from its controller's pod template (DESIGN §3.15) --------------------------


def refusal_of(kind: str, name: str, gpus: int, *, api_version: str, at: float = T0, last: float = T0 + 300):
    ev = failed_create(at, last, kind=kind, name=name, api_version=api_version)
    ev["message"] = (
        f'Error creating: pods "{name}-x7k2p" is forbidden: exceeded quota: gpu-quota, '
        f"requested: requests.nvidia.com/gpu={gpus}, used: requests.nvidia.com/gpu=8, "
        "limited: requests.nvidia.com/gpu=8"
    )
    return ev


SERVING = o.priority_class("online-serving", 900_000)
RS_NAME = "serve-0010-7d9f8b6c5"


def serving_replica_set(replicas: int = 3, gpus: int = 2):
    return o.replica_set(
        name=RS_NAME,
        namespace=NS,
        created=T0,
        template=o.pod_template(gpus=gpus, priority_class="online-serving"),
        replicas=replicas,
        deployment="serve-0010",
    )


def test_a_refused_job_takes_its_tier_and_gpus_from_its_template_not_priority_0():
    job = o.job(
        name="sweep",
        namespace=NS,
        created=T0,
        template=o.pod_template(gpus=4, priority_class="online-serving"),
        parallelism=2,
        completions=2,
    )
    state = state_of(SERVING, job, refusal_of("Job", "sweep", 4, api_version="batch/v1"))
    w = evaluate(state, T0 + 15 * 60).by_key(WorkloadKey(NS, "Job", "sweep"))
    assert (w.state, w.tier, w.priority, w.priority_class) == (
        WorkloadState.QUOTA_BLOCKED,
        "high",
        900_000,
        "online-serving",
    )
    assert (w.gpus_requested, w.gpus_per_pod) == (8, 4)  # both pods of the Job, 4 GPUs each
    # The high tier warns after 15 minutes; the lowest tier, where priority 0 put it, after 2 hours.
    assert (w.warn_after, w.severity) == (15 * 60, "warning")


def test_without_its_controller_a_refusal_still_falls_back_to_the_cluster_default():
    state = state_of(SERVING, refusal_of("Job", "sweep", 4, api_version="batch/v1"))
    w = evaluate(state, T0 + 15 * 60).by_key(WorkloadKey(NS, "Job", "sweep"))
    assert (w.tier, w.gpus_requested, w.severity) == ("low", 4, "")


@pytest.mark.parametrize("event_first", [False, True], ids=["replicaset-first", "event-first"])
def test_a_replicaset_refusal_lands_on_its_deployment_with_its_templates_tier_and_gpus(event_first):
    ev = refusal_of("ReplicaSet", RS_NAME, 2, api_version="apps/v1")
    objs = [SERVING, ev, serving_replica_set()] if event_first else [SERVING, serving_replica_set(), ev]
    snap = evaluate(state_of(*objs), T0 + 400)
    (w,) = snap.workloads
    assert w.key == WorkloadKey(NS, "Deployment", "serve-0010")
    assert (w.state, w.tier, w.priority_class) == (WorkloadState.QUOTA_BLOCKED, "high", "online-serving")
    assert (w.gpus_requested, w.gpus_per_pod) == (6, 2)  # three replicas of 2 GPUs, none created


def test_a_deployment_with_some_pods_made_and_the_rest_refused_counts_only_the_missing_ones():
    owner = o.owner_ref("ReplicaSet", RS_NAME, api_version="apps/v1", uid="rs-1")
    running = running_pod(
        f"{RS_NAME}-abcde", "gpu-1", gpus=2, owner=owner, labels={"pod-template-hash": "7d9f8b6c5"}
    )
    state = state_of(o.node("gpu-1"), SERVING, serving_replica_set(), running)
    apply(state, refusal_of("ReplicaSet", RS_NAME, 2, api_version="apps/v1", at=T0 + 100, last=T0 + 300))
    w = evaluate(state, T0 + 400).by_key(WorkloadKey(NS, "Deployment", "serve-0010"))
    assert w.state is WorkloadState.QUOTA_BLOCKED
    assert (w.pods_running, w.gpus_held, w.gpus_requested) == (1, 2, 6)


def test_a_refused_paddlejob_is_tiered_by_its_gpu_role_not_its_parameter_server():
    job = o.paddle_job_object(
        name="llm",
        namespace=NS,
        created=T0,
        roles={
            "ps": (1, o.pod_template(gpus=0, priority_class="batch")),
            "worker": (4, o.pod_template(gpus=8, priority_class="online-serving")),
        },
    )
    state = state_of(SERVING, o.priority_class("batch", 100_000), job, failed_create(T0, T0 + 300))
    w = evaluate(state, T0 + 400).by_key(WorkloadKey(NS, "PaddleJob", "llm"))
    assert (w.tier, w.priority_class, w.gpus_requested, w.gpus_per_pod) == ("high", "online-serving", 32, 8)


def test_a_controller_scaled_to_zero_or_deleted_is_forgotten():
    state = state_of(serving_replica_set())
    assert state.control.controller(WorkloadKey(NS, "ReplicaSet", RS_NAME)) is not None
    apply(state, serving_replica_set(replicas=0))
    assert state.control.controller(WorkloadKey(NS, "ReplicaSet", RS_NAME)) is None
    apply(state, serving_replica_set())
    apply(state, serving_replica_set(), deleted=True)
    assert state.control.controllers_of("ReplicaSet") == {}
