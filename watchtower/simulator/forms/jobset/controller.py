"""The JobSet form's controller: the JobSet object and the JobSet controller's child Jobs, one per replica
of each replicatedJob, made with the JobSet and deleted with it (the shapes in objects.py).

Its pods are its child Jobs': named, labelled and owned by them (`pod`). A quota refusal's event on the
child Job is still the core's (controllers.py `_refused`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from watchtower.simulator import objects as obj
from watchtower.simulator.controllers import child_job, templates_by_role
from watchtower.simulator.forms.jobset import objects as jso
from watchtower.simulator.hooks import FormController, PodDraft

if TYPE_CHECKING:
    from watchtower.simulator.pods import SimWorkload
    from watchtower.simulator.store import Store
    from watchtower.simulator.workloads import PodTemplate


class JobSets(FormController):
    """Makes the JobSets and their child Jobs; those are in the store (`child_jobs`), listed with the Jobs."""

    def build(self, w: SimWorkload) -> dict[str, Any] | None:
        spec = w.spec
        if spec.kind != "JobSet":
            return None
        # One Job per replica of each replicatedJob, of parallelism = its pods per Job.
        per_job = {t.role: int(t.name.rsplit("-", 2)[-1]) + 1 for t in spec.pods}
        replicas = {t.role: int(t.name.rsplit("-", 2)[-2]) + 1 for t in spec.pods}
        roles = templates_by_role(w)
        js = jso.jobset(
            name=spec.name,
            namespace=spec.namespace,
            created=w.created,
            replicated_jobs={rj: (replicas[rj], per_job[rj], tpl) for rj, (_, tpl) in roles.items()},
            train_job=spec.train_job,
        )
        js["metadata"]["uid"] = w.uid
        return js

    def created(self, store: Store, w: SimWorkload, body: dict[str, Any] | None) -> None:
        if w.spec.kind != "JobSet" or body is None:
            return
        jobs = jso.child_jobs(body)
        for j in jobs:
            j["metadata"]["uid"] = store.new_uid(f"job/{j['metadata']['name']}")
            store.emit("Job", j, "ADDED")
        store.child_jobs[w.uid] = jobs

    def pod(self, store: Store, w: SimWorkload, tpl: PodTemplate, draft: PodDraft) -> None:
        child = child_job(store, w, tpl)
        if child is None:
            return
        # A JobSet's Jobs are Indexed: `<job>-<completion index>-<suffix>`, labelled and owned by its Job.
        draft.name = f"{tpl.name}-{store.suffix()}"
        cm = child["metadata"]
        draft.labels.update(child["spec"]["template"]["metadata"]["labels"])
        draft.labels["batch.kubernetes.io/job-completion-index"] = tpl.name.rsplit("-", 1)[-1]
        draft.owner = obj.owner_ref("Job", cm["name"], api_version="batch/v1", uid=cm["uid"])

    def gone(self, store: Store, w: SimWorkload) -> None:
        for j in store.child_jobs.pop(w.uid, ()):
            store.emit("Job", j, "DELETED")


def controller(store: Store, created: float) -> JobSets:
    return JobSets()
