"""JobSets and the child Jobs and pods their controller makes, shaped as the API server returns them.

From kubernetes-sigs/jobset pkg/controllers/jobset_controller.go (labelAndAnnotateObject: the labels on
child Jobs and their pods; child Jobs `<jobset>-<replicatedJob>-<index>`, controlled by the JobSet) and
kubeflow/trainer pkg/runtime/framework/plugins/jobset/jobset.go (a TrainJob's JobSet has its name and is
controlled by it).
"""

from __future__ import annotations

from typing import Any

from watchtower.simulator.objects import controller_meta, job, new_uid, owner_ref, pod

JOBSET_API = "jobset.x-k8s.io/v1alpha2"
TRAINER_API = "trainer.kubeflow.org/v1alpha1"


def jobset(
    *,
    name: str,
    namespace: str,
    created: float,
    replicated_jobs: dict[str, tuple[int, int, dict[str, Any]]],
    train_job: bool = False,
    suspend: bool = False,
) -> dict[str, Any]:
    """A JobSet: per replicatedJob (replicas, parallelism, pod template); a TrainJob's when `train_job`."""
    meta = controller_meta(name, namespace, created, None, "1")
    if train_job:
        meta["ownerReferences"] = [
            owner_ref("TrainJob", name, api_version=TRAINER_API, uid=new_uid(f"trainjob/{namespace}/{name}"))
        ]
    rjobs = [
        {
            "name": rj,
            "replicas": replicas,
            "template": {
                "spec": {"parallelism": par, "completions": par, "backoffLimit": 0, "template": tpl}
            },
        }
        for rj, (replicas, par, tpl) in replicated_jobs.items()
    ]
    return {
        "apiVersion": JOBSET_API,
        "kind": "JobSet",
        "metadata": meta,
        "spec": {
            "replicatedJobs": rjobs,
            "suspend": suspend,
            "startupPolicy": {"startupPolicyOrder": "AnyOrder"},
        },
        "status": {"restarts": 0},
    }


def _labels(js: dict[str, Any], rj: dict[str, Any], index: int) -> dict[str, str]:
    return {
        "jobset.sigs.k8s.io/jobset-name": js["metadata"]["name"],
        "jobset.sigs.k8s.io/jobset-uid": js["metadata"]["uid"],
        "jobset.sigs.k8s.io/replicatedjob-name": rj["name"],
        "jobset.sigs.k8s.io/replicatedjob-replicas": str(rj["replicas"]),
        "jobset.sigs.k8s.io/job-index": str(index),
        "jobset.sigs.k8s.io/restart-attempt": "0",
    }


def child_jobs(js: dict[str, Any]) -> list[dict[str, Any]]:
    """Return the Jobs the JobSet controller makes: one per replica of each replicatedJob."""
    out = []
    created = 0.0
    for rj in js["spec"]["replicatedJobs"]:
        spec = rj["template"]["spec"]
        for i in range(rj["replicas"]):
            name = f"{js['metadata']['name']}-{rj['name']}-{i}"
            tpl = {**spec["template"], "metadata": {"labels": _labels(js, rj, i)}}
            j = job(
                name=name,
                namespace=js["metadata"]["namespace"],
                created=created,
                template=tpl,
                parallelism=spec["parallelism"],
                completions=spec["completions"],
            )
            j["metadata"]["creationTimestamp"] = js["metadata"]["creationTimestamp"]
            j["metadata"]["labels"] = _labels(js, rj, i)
            j["metadata"]["ownerReferences"] = [
                owner_ref("JobSet", js["metadata"]["name"], api_version=JOBSET_API, uid=js["metadata"]["uid"])
            ]
            out.append(j)
    return out


def child_pods(j: dict[str, Any], *, created: float, gpus: int, **kw: Any) -> list[dict[str, Any]]:
    """Return the pods a child Job makes (its parallelism), labelled by the JobSet controller and the Job's."""
    name = j["metadata"]["name"]
    owner = owner_ref("Job", name, api_version="batch/v1", uid=j["metadata"]["uid"])
    labels = j["spec"]["template"]["metadata"]["labels"]
    return [
        pod(
            name=f"{name}-{i}-x{i}k2p",
            namespace=j["metadata"]["namespace"],
            created=created,
            gpus=gpus,
            labels=labels,
            owner=owner,
            **kw,
        )
        for i in range(j["spec"]["parallelism"])
    ]
