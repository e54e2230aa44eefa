"""A Kueue Workload is named and alerted on as the job its owner chain leads to (DESIGN §3.17).

Kueue v0.17.0 gives a job's Workload one ownerReference, the job itself with `controller: true`
(pkg/controller/jobframework/reconciler.go: `ctrl.SetControllerReference(object, wl, ...)`), named
`<lowercase kind>-<job name>-<5 hex>` (workload_names.go). With its TrainJob integration on, the TrainJob
owns the Workload (`trainjob-<name>-<hash>`); with only the JobSet integration, the TrainJob's JobSet is a
top-level job and owns it (`jobset-<name>-<hash>`), and only the JobSet's own ownerReference names the
TrainJob. Kueue keeps that JobSet suspended while the Workload waits. The real capture of a Job's Workload
(tests/fixtures/real/kueue/pending.json) has that one reference, `controller` and `blockOwnerDeletion` true,
and the name `job-train-b4bf7`. Objects shaped from those sources:
watchtower/simulator/forms/kueue/objects.py, forms/jobset/objects.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.domain.alerts.builders import rule_input
from tests.unit.domain.helpers import GPU_FULL, NS, T0, apply, evaluate, state_of
from watchtower.domain.alerts.rules import tiered_wait
from watchtower.domain.forms.kueue.records import SOURCE_KUEUE
from watchtower.domain.queue import WorkloadState
from watchtower.domain.workloads import WorkloadKey
from watchtower.services.queue_json import workload_dict
from watchtower.simulator import objects as o
from watchtower.simulator.forms.jobset import objects as js_o
from watchtower.simulator.forms.kueue import objects as k

TRAINJOB = WorkloadKey(NS, "TrainJob", "llama-ft")


def queue_objects() -> list[dict[str, Any]]:
    return [
        o.node("gpu-1"),
        k.workload_priority_class("urgent-kueue", 1_000_000),
        k.cluster_queue("team-cq", nominal_gpus=8, reserved_gpus=8),
        k.local_queue(NS, "team", "team-cq"),
    ]


def train_jobset(*, suspend: bool) -> dict[str, Any]:
    tpl = o.pod_template(gpus=8, priority_class="batch")
    return js_o.jobset(
        name="llama-ft",
        namespace=NS,
        created=T0,
        replicated_jobs={"node": (1, 2, tpl)},
        train_job=True,
        suspend=suspend,
    )


def jobset_workload(js: dict[str, Any], **kw: Any) -> dict[str, Any]:
    tpl = js["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    return k.workload(
        job=js,
        queue="team",
        created=T0 + 1,
        pod_sets=[("node", 2, tpl)],
        priority=1_000_000,
        priority_class="urgent-kueue",
        pending=(T0 + 2, k.pending_message("node", "default-flavor", 16)),
        **kw,
    )


@pytest.mark.parametrize("jobset_first", [True, False])
def test_a_jobset_workload_of_a_train_job_waits_and_alerts_as_the_train_job(jobset_first: bool) -> None:
    js = train_jobset(suspend=True)
    wl = jobset_workload(js)
    assert wl["metadata"]["name"].startswith("jobset-llama-ft-")
    (ref,) = wl["metadata"]["ownerReferences"]
    assert (ref["kind"], ref["apiVersion"], ref["controller"]) == ("JobSet", js_o.JOBSET_API, True)
    # Separate watches: the Workload may come before the JobSet that names its TrainJob.
    st = state_of(*queue_objects(), *([js, wl] if jobset_first else [wl, js]))
    now = T0 + 20 * 60
    snap = evaluate(st, now)
    (w,) = snap.workloads
    assert w.key == TRAINJOB
    assert (w.state, w.source, w.gpus_requested, w.tier) == (
        WorkloadState.PENDING,
        SOURCE_KUEUE,
        16,
        "critical",
    )
    d = workload_dict(w)
    assert (d["kind"], d["name"], d["kueue"]["workload"]) == ("TrainJob", "llama-ft", wl["metadata"]["name"])
    alerts = tiered_wait.evaluate(rule_input(snap))
    assert {(a.labels["kind"], a.labels["workload"]) for a in alerts} == {("TrainJob", "llama-ft")}


def test_admitted_its_pods_and_its_workload_stay_one_train_job() -> None:
    js = train_jobset(suspend=True)
    st = state_of(*queue_objects(), js, jobset_workload(js))
    # Admitted: Kueue unsuspends the JobSet, its child Jobs make pods that the scheduler cannot place yet.
    admitted = jobset_workload(js, reserved=(T0 + 600, "team-cq"), admitted_at=T0 + 600, resource_version="2")
    running = train_jobset(suspend=False)
    jobs = js_o.child_jobs(running)
    pods = []
    for j in jobs:
        for p in js_o.child_pods(j, created=T0 + 605, gpus=8):
            p["status"]["conditions"] = [o.unschedulable(T0 + 606, GPU_FULL)]
            pods.append(p)
    for obj in (admitted, running, *jobs, *pods):
        apply(st, obj)
    (w,) = evaluate(st, T0 + 1200).workloads
    assert (w.key, w.state, w.source, w.pods_pending) == (TRAINJOB, WorkloadState.PENDING, "pods", 2)
    assert w.since == T0 + 1 and w.kueue is not None and w.kueue.admitted


def test_a_train_jobs_own_workload_is_the_train_job() -> None:
    """With Kueue's TrainJob integration the Workload is the TrainJob's, no JobSet read at all."""
    tj = {
        "apiVersion": js_o.TRAINER_API,
        "kind": "TrainJob",
        "metadata": {"name": "llama-ft", "namespace": NS, "uid": o.new_uid(f"trainjob/{NS}/llama-ft")},
    }
    tpl = o.pod_template(gpus=8, priority_class="batch")
    wl = k.workload(
        job=tj,
        queue="team",
        created=T0 + 1,
        pod_sets=[("node", 2, tpl)],
        priority=1_000_000,
        pending=(T0 + 2, k.pending_message("node", "default-flavor", 16)),
    )
    assert wl["metadata"]["name"].startswith("trainjob-llama-ft-")
    (w,) = evaluate(state_of(*queue_objects(), wl), T0 + 600).workloads
    assert (w.key, w.source) == (TRAINJOB, SOURCE_KUEUE)


def test_a_jobset_of_no_train_job_stays_the_jobset() -> None:
    tpl = o.pod_template(gpus=8, priority_class="batch")
    js = js_o.jobset(
        name="pretrain", namespace=NS, created=T0, replicated_jobs={"node": (1, 2, tpl)}, suspend=True
    )
    wl = jobset_workload(js)
    (w,) = evaluate(state_of(*queue_objects(), js, wl), T0 + 600).workloads
    assert w.key == WorkloadKey(NS, "JobSet", "pretrain")


def test_a_kueue_held_jobs_wait_alert_has_no_place_in_the_schedulers_queue() -> None:
    """Its place is Kueue's: the alert says so in the start estimate, and carries no position_in_tier (once
    it read "None")."""
    import dataclasses

    from watchtower.domain.estimate import TierWaits

    js = train_jobset(suspend=True)
    st = state_of(*queue_objects(), js, jobset_workload(js))
    now = T0 + 20 * 60
    snap = evaluate(st, now)
    inp = dataclasses.replace(rule_input(snap), waits=TierWaits(at=now, window=21600.0, min_samples=5))
    (alert,) = [a for a in tiered_wait.evaluate(inp) if a.labels["severity"] == "critical"] or [None]
    assert alert is not None
    assert "position_in_tier" not in alert.annotations
    assert "held by Kueue" in alert.annotations["start_estimate"]
