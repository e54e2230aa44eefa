"""JobSet and TrainJob work is one workload, never one per child Job (DESIGN §3.17).

Objects shaped as the JobSet controller (kubernetes-sigs/jobset) and the TrainJob controller
(kubeflow/trainer) write them: watchtower/simulator/forms/jobset/objects.py.
"""

from __future__ import annotations

import pytest

from tests.unit.domain.helpers import DECODER, GPU_FULL, NS, T0, apply, evaluate, raw, state_of
from watchtower.domain.queue import WorkloadState
from watchtower.domain.workloads import WorkloadKey
from watchtower.simulator import objects as o
from watchtower.simulator.forms.jobset import objects as js_o

REFUSAL = (
    'Error creating: pods "{job}-0-x7k2p" is forbidden: exceeded quota: gpu-quota, '
    "requested: requests.nvidia.com/gpu=8, used: requests.nvidia.com/gpu=40, limited: requests.nvidia.com/gpu=40"
)


def a_jobset(name: str = "pretrain", *, train_job: bool = False):
    tpl = o.pod_template(gpus=8, priority_class="batch")
    return js_o.jobset(
        name=name,
        namespace=NS,
        created=T0,
        replicated_jobs={"driver": (1, 2, tpl), "workers": (1, 2, tpl)},  # 2 replicated Jobs × 2 pods
        train_job=train_job,
    )


def pending_pods(jobs) -> list:
    pods = []
    for j in jobs:
        for p in js_o.child_pods(j, created=T0 + 5, gpus=8):
            p["status"]["conditions"] = [o.unschedulable(T0 + 6, GPU_FULL)]
            pods.append(p)
    return pods


def refused(job: dict) -> dict:
    name = job["metadata"]["name"]
    return o.core_event(
        namespace=NS,
        reason="FailedCreate",
        message=REFUSAL.format(job=name),
        type_="Warning",
        component="job-controller",
        involved={
            "kind": "Job",
            "namespace": NS,
            "name": name,
            "uid": job["metadata"]["uid"],
            "apiVersion": "batch/v1",
        },
        at=T0 + 5,
        last=T0 + 300,
        count=7,
    )


def test_a_jobset_of_two_replicated_jobs_is_one_workload_of_four_pods():
    js = a_jobset()
    jobs = js_o.child_jobs(js)
    state = state_of(o.node("gpu-1"), js, *jobs, *pending_pods(jobs))
    snap = evaluate(state, T0 + 600)
    (w,) = snap.waiting()
    assert (w.kind, w.name, w.pods_pending, w.gpus_requested) == ("JobSet", "pretrain", 4, 32)
    assert w.state is WorkloadState.PENDING


def test_the_jobset_label_wins_without_the_jobset_object():
    """The JobSet CRD may be unread (not installed, not yet listed): its pods' label still groups them."""
    jobs = js_o.child_jobs(a_jobset())
    state = state_of(o.node("gpu-1"), *pending_pods(jobs))
    (w,) = evaluate(state, T0 + 600).waiting()
    assert (w.kind, w.name, w.pods_pending) == ("JobSet", "pretrain", 4)


@pytest.mark.parametrize("jobset_first", [True, False])
def test_a_train_jobs_jobset_is_the_train_job(jobset_first):
    js = a_jobset("llama-ft", train_job=True)
    jobs = js_o.child_jobs(js)
    pods = pending_pods(jobs)
    # The watches are separate streams: the JobSet may come after its pods, which then move up.
    objs = [js, *jobs, *pods] if jobset_first else [*jobs, *pods, js]
    state = state_of(o.node("gpu-1"), *objs)
    (w,) = evaluate(state, T0 + 600).waiting()
    assert (w.kind, w.name, w.pods_pending) == ("TrainJob", "llama-ft", 4)
    assert set(state.by_workload) == {WorkloadKey(NS, "TrainJob", "llama-ft")}
    assert state.waiting_workloads == {WorkloadKey(NS, "TrainJob", "llama-ft"): 4}


@pytest.mark.parametrize(
    ("train_job", "kind", "name"), [(False, "JobSet", "pretrain"), (True, "TrainJob", "pretrain")]
)
def test_a_quota_refusal_on_a_child_job_lands_on_its_workload(train_job, kind, name):
    js = a_jobset(train_job=train_job)
    jobs = js_o.child_jobs(js)
    # The driver Job's pods run; the workers Job is refused by the quota.
    driver = js_o.child_pods(
        jobs[0], created=T0 + 5, gpus=8, node="gpu-1", phase="Running", conditions=[o.scheduled(T0 + 10)]
    )
    state = state_of(
        o.node("gpu-1"), o.resource_quota(NS, "gpu-quota", hard_gpus=40, used_gpus=40), js, *jobs, *driver
    )
    apply(state, refused(jobs[1]))
    (w,) = evaluate(state, T0 + 400).waiting()
    assert (w.kind, w.name, w.state) == (kind, name, WorkloadState.QUOTA_BLOCKED)
    assert w.quota is not None and w.quota.quota == "gpu-quota"
    assert (w.pods_running, w.gpus_held) == (2, 16)
    assert "refused by ResourceQuota gpu-quota" in w.why


def test_a_refusal_before_the_jobset_is_known_moves_to_the_train_job():
    js = a_jobset("llama-ft", train_job=True)
    jobs = js_o.child_jobs(js)
    state = state_of(*jobs)
    apply(state, refused(jobs[0]))
    apply(state, js)
    (w,) = evaluate(state, T0 + 400).waiting()
    assert (w.kind, w.name, w.state) == ("TrainJob", "llama-ft", WorkloadState.QUOTA_BLOCKED)
    assert state.control.workload_of_controller(WorkloadKey(NS, "Job", jobs[0]["metadata"]["name"])) == w.key


def test_the_decoded_jobset_wants_every_child_jobs_pods_and_names_its_train_job():
    c = DECODER.decode("JobSet", raw(a_jobset("llama-ft", train_job=True)))
    assert (c.kind, c.name, c.pods, c.gpus, c.gpus_per_pod, c.priority_class) == (
        "JobSet",
        "llama-ft",
        4,
        32,
        8,
        "batch",
    )
    assert c.owner is not None and (c.owner.kind, c.owner.name) == ("TrainJob", "llama-ft")


def test_a_suspended_jobset_wants_no_pods():
    js = a_jobset()
    js["spec"]["suspend"] = True
    assert DECODER.decode("JobSet", raw(js)).pods == 0


@pytest.mark.parametrize(
    "body",
    [
        b'{"kind": "JobSet", "metadata": {"namespace": "x"}}',
        b'{"kind": "JobSet", "metadata": {"name": "a", "namespace": "x"}, "spec": {"replicatedJobs": "nope"}}',
        b'{"kind": "JobSet", "metadata": {"name": "a", "namespace": "x"}, "spec": {"replicatedJobs": [{"replicas": "2"}]}}',
    ],
)
def test_a_malformed_jobset_is_a_decode_error(body):
    from watchtower.ports import DecodeError

    with pytest.raises(DecodeError):
        DECODER.decode("JobSet", body)


def test_a_jobset_owned_by_another_groups_train_job_stays_the_jobset():
    """Only kubeflow's TrainJob is lifted: an owner of that kind from another API group is not it."""
    js = a_jobset("loop")
    js["metadata"]["ownerReferences"] = [
        o.owner_ref("TrainJob", "loop", api_version="example.com/v1", uid="t")
    ]
    state = state_of(js)
    assert state.control.workload_of_controller(WorkloadKey(NS, "JobSet", "loop")) == WorkloadKey(
        NS, "JobSet", "loop"
    )
