"""ResourceQuota refusals: work that never became a pod (DESIGN §3.9)."""

from __future__ import annotations

from watchtower.adapters.sim import objects as o
from watchtower.domain.queue import WorkloadState
from watchtower.domain.workloads import WorkloadKey

from .helpers import NS, T0, apply, evaluate, paddle_owner, running_pod, state_of

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
    assert state.quota_refusals == {}


def test_repeated_refusal_events_keep_the_first_time():
    state = state_of(failed_create(T0, T0 + 60), failed_create(T0 + 30, T0 + 600, count=9))
    q = state.quota_refusals[WorkloadKey(NS, "PaddleJob", "llm")]
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
