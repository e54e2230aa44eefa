"""The JobSet controller's child Jobs: one per replica of each replicatedJob, made with the JobSet and
deleted with it (the shapes in objects.py).

The JobSet object itself, and its pods' names, labels and owners (its child Jobs'), are still made by the
core's controllers.py with the other controllers' objects.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from watchtower.simulator.forms.jobset import objects as jso
from watchtower.simulator.hooks import FormController

if TYPE_CHECKING:
    from watchtower.simulator.pods import SimWorkload
    from watchtower.simulator.store import Store


class JobSets(FormController):
    """Writes a JobSet's child Jobs; they are in the store (`child_jobs`), listed with the Jobs."""

    def created(self, store: Store, w: SimWorkload, body: dict[str, Any] | None) -> None:
        if w.spec.kind != "JobSet" or body is None:
            return
        jobs = jso.child_jobs(body)
        for j in jobs:
            j["metadata"]["uid"] = store.new_uid(f"job/{j['metadata']['name']}")
            store.emit("Job", j, "ADDED")
        store.child_jobs[w.uid] = jobs

    def gone(self, store: Store, w: SimWorkload) -> None:
        for j in store.child_jobs.pop(w.uid, ()):
            store.emit("Job", j, "DELETED")


def controller(store: Store, created: float) -> JobSets:
    return JobSets()
