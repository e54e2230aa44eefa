"""The quota form: work a ResourceQuota refuses, read from the controllers whose pods it refuses.

A ResourceQuota's GPUs (nvidia.com/gpu, and the devices of GPU DeviceClasses, DESIGN §3.16), and the
batch/v1 Job and apps/v1 ReplicaSet as the pods they want now (DESIGN §3.15).
"""

from __future__ import annotations

import msgspec

from watchtower.domain import kinds
from watchtower.domain.forms.quota.refusals import DRA_QUOTA_SUFFIX, GPU_QUOTA_RESOURCE
from watchtower.domain.records import Controller, ResourceQuota

from .. import wire
from ..quantities import ceil_int, parse_quantity
from ..reading import KindReader, Reading, named, reader
from ..wire import Meta, Qty


class QuotaStatus(msgspec.Struct, gc=False):
    hard: dict[str, Qty] | None = None
    used: dict[str, Qty] | None = None


class QuotaSpec(msgspec.Struct, gc=False):
    hard: dict[str, Qty] | None = None


class Quota(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: QuotaSpec | None = None
    status: QuotaStatus | None = None


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds, by kind name."""
    keys = (GPU_QUOTA_RESOURCE, *(c + DRA_QUOTA_SUFFIX for c in sorted(ctx.gpu_device_classes)))

    def gpu(d: dict[str, Qty] | None) -> int | None:
        # nvidia.com/gpu requests and DRA devices of GPU classes are both GPUs (DESIGN §3.16).
        found = [ceil_int(parse_quantity(d[k])) for k in keys if k in d] if d else []
        return sum(found) if found else None

    def quota(q: Quota) -> ResourceQuota:
        meta = named(q.metadata, "ResourceQuota")
        st = q.status or QuotaStatus()
        hard = st.hard if st.hard is not None else (q.spec.hard if q.spec else None)
        return ResourceQuota(meta.namespace or "", meta.name or "", gpu(hard), gpu(st.used))

    def job(j: wire.Controller) -> Controller:
        """A batch/v1 Job as the pods it wants now: parallelism, capped by the completions left."""
        spec = j.spec or wire.ControllerSpec()
        wanted = spec.parallelism if spec.parallelism is not None else 1
        if spec.completions is not None:
            done = j.status.succeeded if j.status is not None else None
            wanted = min(wanted, spec.completions - (done or 0))
        if spec.suspend:
            wanted = 0  # Kueue holds it: no pod is even tried
        return ctx.controller("Job", j.metadata, [(wanted, spec.template)])

    def replica_set(rs: wire.Controller) -> Controller:
        """An apps/v1 ReplicaSet as the pods it wants; its owner names its Deployment."""
        spec = rs.spec or wire.ControllerSpec()
        wanted = spec.replicas if spec.replicas is not None else 1
        return ctx.controller("ReplicaSet", rs.metadata, [(wanted, spec.template)])

    return {
        kinds.RESOURCE_QUOTA.name: KindReader(reader("ResourceQuota", Quota, quota)),
        kinds.JOB.name: KindReader(reader("Job", wire.Controller, job)),
        kinds.REPLICA_SET.name: KindReader(reader("ReplicaSet", wire.Controller, replica_set)),
    }
