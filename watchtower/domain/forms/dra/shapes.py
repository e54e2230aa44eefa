"""The DRA form's JSON, key by key (domain/forms/shapes.py): what present.py returns, as /openapi.json
documents it."""

from __future__ import annotations

from typing import Literal, TypedDict


class GpuClaim(TypedDict):
    """One DRA ResourceClaim of its pods that asks GPUs (a device class listed in `gpu.device_classes`)."""

    name: str
    """the ResourceClaim (the generated one for a template's), or the pod's claim entry while not made yet"""
    device_class: str
    """the GPU DeviceClass its request names (`gpu.nvidia.com`)"""
    count: int
    """GPUs it asks: `exactly.count` (1 if unset); `allocationMode: All` before allocation: the most one node's
    slices offer; `firstAvailable`: the first subrequest; once allocated: the devices allocated"""
    allocated: bool
    """`status.allocation` is set"""
    devices: list[str]
    """the allocated GPU devices, `driver/pool/device`"""


class DraWorkload(TypedDict):
    """A workload's keys of the DRA form."""

    gpu_claims: list[GpuClaim]
    """its pods' DRA claims that ask GPUs (empty when it asks `nvidia.com/gpu` only); their GPUs are in
    `gpus_requested`, `gpus_per_pod` and `gpus_held`"""
    dra_problem: Literal["shortage", "config", "pending"] | None
    """what the scheduler's DynamicResources words say: `shortage` (no free devices for its claims:
    `cannot allocate all claims`, claim allocated elsewhere or in use), `config` (a claim, template or device
    class is missing or wrong; no capacity will help), `pending` (an allocation is under way); null otherwise"""


class DraProblem(TypedDict):
    """A pod that names a DRA ResourceClaim, ResourceClaimTemplate or DeviceClass that is not there: the
    DynamicResources plugin cannot place it (a missing claim holds it before the queue, with no condition and
    no event), and its GPUs are unknown, so it may be in no workload."""

    namespace: str
    """the pod's namespace"""
    pod: str
    """the pod"""
    owner_kind: str | None
    """its controller's kind (`Job`, ...), null for a bare pod"""
    owner_name: str | None
    """its controller's name"""
    reason: Literal["claim_missing", "template_missing", "claim_deleting", "class_missing"]
    """what is not there: the claim it names, the template its claim is made from, a claim being deleted, the
    device class a claim's request names"""
    why: str
    """in words, naming the object, e.g. `ResourceClaim gpus-0 does not exist`"""
    pending_seconds: float
    """since the pod's creation"""


class DraSections(TypedDict):
    """The queue document's sections of the DRA form."""

    dra_problems: list[DraProblem]
    """pods naming a DRA claim, template or device class that is not there, whatever the filters, oldest
    first"""
