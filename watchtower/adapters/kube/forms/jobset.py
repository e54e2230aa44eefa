"""The JobSet form: jobset.x-k8s.io/v1alpha2 JobSet (kubernetes-sigs/jobset
api/jobset/v1alpha2/jobset_types.go), read for the pods of its child Jobs; its owner names a TrainJob."""

from __future__ import annotations

import msgspec

from watchtower.domain import kinds
from watchtower.domain.records import Controller

from .. import wire
from ..reading import KindReader, Reading, reader
from ..wire import ControllerMeta, ControllerSpec


class JobTemplate(msgspec.Struct, gc=False):
    spec: ControllerSpec | None = None


class ReplicatedJob(msgspec.Struct, gc=False):
    """One replicatedJob of a JobSet: `replicas` child Jobs made from one Job template."""

    replicas: int | None = None
    template: JobTemplate | None = None


class JobSetSpec(msgspec.Struct, gc=False):
    replicatedJobs: list[ReplicatedJob] | None = None
    suspend: bool | None = None


class JobSet(msgspec.Struct, gc=False):
    """jobset.x-k8s.io/v1alpha2 JobSet (kubernetes-sigs/jobset api/jobset/v1alpha2/jobset_types.go)."""

    metadata: ControllerMeta | None = None
    spec: JobSetSpec | None = None


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds, by kind name."""

    def jobset(js: JobSet) -> Controller:
        """A JobSet as the pods of all its child Jobs together; its owner names a TrainJob."""
        spec = js.spec or JobSetSpec()
        roles: list[tuple[int, wire.Template | None]] = []
        for rj in spec.replicatedJobs or ():
            job = (rj.template.spec if rj.template is not None else None) or wire.ControllerSpec()
            per_job = job.parallelism if job.parallelism is not None else 1
            if job.completions is not None:
                per_job = min(per_job, job.completions)
            jobs = rj.replicas if rj.replicas is not None else 1
            roles.append((0 if spec.suspend else jobs * per_job, job.template))
        return ctx.controller("JobSet", js.metadata, roles)

    return {kinds.JOBSET.name: KindReader(reader("JobSet", JobSet, jobset))}
