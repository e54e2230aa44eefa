"""The PaddleJob form: batch.paddlepaddle.org/v1 PaddleJob (PaddleFlow/paddle-operator
api/v1/paddlejob_types.go), the pods of its roles together with its own status."""

from __future__ import annotations

import msgspec

from watchtower.domain import kinds
from watchtower.domain.records import Controller
from watchtower.ports import DecodeError

from ..reading import KindReader, Reading, parse_time, reader
from ..wire import ControllerMeta, Template


class PaddleRole(msgspec.Struct, gc=False):
    """One role of a PaddleJob (ps, worker, heter): how many pods, made from which template."""

    replicas: int | None = None
    template: Template | None = None


class PaddleSchedulingPolicy(msgspec.Struct, gc=False):
    """spec.schedulingPolicy: what paddle-operator copies into the job's Volcano PodGroup."""

    minAvailable: int | None = None
    queue: str | None = None
    priorityClass: str | None = None


class PaddleJobSpec(msgspec.Struct, gc=False):
    ps: PaddleRole | None = None
    worker: PaddleRole | None = None
    heter: PaddleRole | None = None
    schedulingPolicy: PaddleSchedulingPolicy | None = None


class PaddleRoleStatus(msgspec.Struct, gc=False):
    """One role's ResourceStatus: how many of its pods are in each state."""

    pending: int | None = None
    starting: int | None = None
    running: int | None = None
    failed: int | None = None
    succeeded: int | None = None
    unknown: int | None = None


class PaddleJobStatus(msgspec.Struct, gc=False):
    phase: str | None = None
    ps: PaddleRoleStatus | None = None
    worker: PaddleRoleStatus | None = None
    heter: PaddleRoleStatus | None = None


class PaddleJob(msgspec.Struct, gc=False):
    """batch.paddlepaddle.org/v1 PaddleJob (PaddleFlow/paddle-operator api/v1/paddlejob_types.go)."""

    metadata: ControllerMeta | None = None
    spec: PaddleJobSpec | None = None
    status: PaddleJobStatus | None = None


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds, by kind name."""

    def paddle_job(pj: PaddleJob) -> Controller:
        """A PaddleJob as the pods of its roles (ps, worker, heter) together, with its own status:
        phase, the pods its roles count, and its schedulingPolicy (whose class outranks the template's)."""
        spec = pj.spec or PaddleJobSpec()
        roles = [(r.replicas or 0, r.template) for r in (spec.ps, spec.worker, spec.heter) if r is not None]
        c = ctx.controller("PaddleJob", pj.metadata, roles)
        st = pj.status or PaddleJobStatus()
        reported = 0
        for rs in (st.ps, st.worker, st.heter):
            if rs is not None:
                counts = (rs.pending, rs.starting, rs.running, rs.failed, rs.succeeded, rs.unknown)
                if any(n is not None and n < 0 for n in counts):
                    raise DecodeError(f"PaddleJob {c.name!r}: a negative pod count", kind="PaddleJob")
                reported += sum(n or 0 for n in counts)
        policy = spec.schedulingPolicy
        pclass = (policy.priorityClass if policy is not None else None) or c.priority_class
        meta = pj.metadata
        return msgspec.structs.replace(
            c,
            priority_class=pclass,
            created=parse_time(meta.creationTimestamp) if meta is not None else None,
            phase=st.phase or "",
            pods_reported=reported,
            min_available=policy.minAvailable if policy is not None else None,
            queue=(policy.queue if policy is not None else None) or "",
        )

    return {kinds.PADDLE_JOB.name: KindReader(reader("PaddleJob", PaddleJob, paddle_job))}
