"""The DRA form, wire → domain: DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice, and a
pod's claims.

Field names are upstream's (k8s.io/api resource/v1/types.go, the same in v1beta2; core/v1
PodResourceClaim, PodResourceClaimStatus). Each raises DecodeError for an object the domain cannot use.
"""

from __future__ import annotations

from sys import intern

import msgspec

from watchtower.domain import kinds
from watchtower.domain.forms.dra.records import (
    ALL,
    AllocatedDevice,
    DeviceClass,
    DeviceRequest,
    PodClaim,
    ResourceClaim,
    ResourceSlice,
    SliceDevice,
    class_from_selectors,
)
from watchtower.ports import DecodeError

from .. import wire
from ..reading import KindReader, Reading, reader
from ..wire import Meta

ALLOCATION_ALL = "All"  # resource/v1 DeviceAllocationModeAll; ExactCount is the default


class CelSelector(msgspec.Struct, gc=False):
    expression: str = ""


class DeviceSelector(msgspec.Struct, gc=False):
    cel: CelSelector | None = None


class DeviceClassSpec(msgspec.Struct, gc=False):
    selectors: list[DeviceSelector] | None = None


class DeviceClassObj(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: DeviceClassSpec | None = None


class ExactDeviceRequest(msgspec.Struct, gc=False):
    """ExactDeviceRequest, and a firstAvailable DeviceSubRequest (which adds its own name)."""

    name: str = ""
    deviceClassName: str = ""
    allocationMode: str | None = None  # ExactCount (default) or All
    count: int | None = None


class DeviceRequestObj(msgspec.Struct, gc=False):
    name: str = ""
    exactly: ExactDeviceRequest | None = None
    firstAvailable: list[ExactDeviceRequest] | None = None


class DeviceClaim(msgspec.Struct, gc=False):
    requests: list[DeviceRequestObj] | None = None


class ResourceClaimSpec(msgspec.Struct, gc=False):
    devices: DeviceClaim | None = None


class AllocationResultItem(msgspec.Struct, gc=False):
    request: str = ""
    driver: str = ""
    pool: str = ""
    device: str = ""


class DeviceAllocation(msgspec.Struct, gc=False):
    results: list[AllocationResultItem] | None = None


class Allocation(msgspec.Struct, gc=False):
    devices: DeviceAllocation | None = None


class ResourceClaimStatus(msgspec.Struct, gc=False):
    allocation: Allocation | None = None


class ResourceClaimObj(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: ResourceClaimSpec | None = None
    status: ResourceClaimStatus | None = None


class ClaimTemplateSpec(msgspec.Struct, gc=False):
    spec: ResourceClaimSpec | None = None


class ResourceClaimTemplate(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: ClaimTemplateSpec | None = None


class DeviceAttribute(msgspec.Struct, gc=False):
    # Only string attributes are read (a class's selectors compare them); int, bool, version skipped.
    string: str | None = None


class SliceDeviceObj(msgspec.Struct, gc=False):
    name: str = ""
    attributes: dict[str, DeviceAttribute] | None = None


class ResourcePool(msgspec.Struct, gc=False):
    name: str = ""
    generation: int | None = None


class ResourceSliceSpec(msgspec.Struct, gc=False):
    driver: str = ""
    pool: ResourcePool | None = None
    nodeName: str | None = None
    devices: list[SliceDeviceObj] | None = None


class ResourceSliceObj(msgspec.Struct, gc=False):
    metadata: Meta | None = None
    spec: ResourceSliceSpec | None = None


def _meta(meta: Meta | None, kind: str, *, namespaced: bool = True) -> Meta:
    if meta is None or not meta.name:
        raise DecodeError(f"{kind} without a name", kind=kind, uid=(meta.uid or "") if meta else "")
    if namespaced and not meta.namespace:
        raise DecodeError(f"{kind} {meta.name!r} without a namespace", kind=kind, uid=meta.uid or "")
    return meta


def _one(r: ExactDeviceRequest, name: str, kind: str, owner: str) -> DeviceRequest:
    if r.allocationMode == ALLOCATION_ALL:
        return DeviceRequest(name, r.deviceClassName, ALL)
    count = 1 if r.count is None else r.count  # "If ... not specified, the default is one."
    if count < 0:
        raise DecodeError(f"{kind} {owner!r}: request {name!r} counts {count} devices", kind=kind, name=owner)
    return DeviceRequest(intern(name), intern(r.deviceClassName), count)


def _requests(spec: ResourceClaimSpec | None, kind: str, owner: str) -> tuple[DeviceRequest, ...]:
    devices = spec.devices if spec is not None else None
    out: list[DeviceRequest] = []
    for r in (devices.requests if devices is not None else None) or ():
        if r.exactly is not None:
            out.append(_one(r.exactly, r.name, kind, owner))
        elif r.firstAvailable:
            subs = tuple(_one(s, s.name, kind, owner) for s in r.firstAvailable)
            out.append(DeviceRequest(intern(r.name), subs[0].device_class, subs[0].count, subs))
    return tuple(out)


def resource_claim(c: ResourceClaimObj) -> ResourceClaim:
    m = _meta(c.metadata, "ResourceClaim")
    name = m.name or ""
    alloc = c.status.allocation if c.status is not None else None
    results = (alloc.devices.results if alloc is not None and alloc.devices is not None else None) or ()
    return ResourceClaim(
        m.namespace or "",
        name,
        _requests(c.spec, "ResourceClaim", name),
        alloc is not None,
        # Shared strings: 20,000 claims name the same few drivers, requests, pools and device names.
        tuple(
            AllocatedDevice(intern(r.request), intern(r.driver), intern(r.pool), intern(r.device))
            for r in results
        ),
        bool(m.deletionTimestamp),
    )


def claim_template(t: ResourceClaimTemplate) -> ResourceClaim:
    m = _meta(t.metadata, "ResourceClaimTemplate")
    name = m.name or ""
    spec = t.spec.spec if t.spec is not None else None
    return ResourceClaim(m.namespace or "", name, _requests(spec, "ResourceClaimTemplate", name))


def device_class(c: DeviceClassObj) -> DeviceClass:
    m = _meta(c.metadata, "DeviceClass", namespaced=False)
    exprs = [s.cel.expression for s in (c.spec.selectors if c.spec else None) or () if s.cel is not None]
    return class_from_selectors(m.name or "", exprs)


def resource_slice(s: ResourceSliceObj) -> ResourceSlice:
    m = _meta(s.metadata, "ResourceSlice", namespaced=False)
    spec = s.spec or ResourceSliceSpec()
    if not spec.driver:
        raise DecodeError(
            f"ResourceSlice {m.name!r} without a driver", kind="ResourceSlice", name=m.name or ""
        )
    pool = spec.pool or ResourcePool()
    devices = []
    for d in spec.devices or ():
        # An unqualified attribute is in the driver's own domain (resource/v1 QualifiedName).
        attrs = tuple(
            (k if "/" in k else f"{spec.driver}/{k}", a.string)
            for k, a in sorted((d.attributes or {}).items())
            if a.string is not None
        )
        devices.append(SliceDevice(d.name, attrs))
    return ResourceSlice(
        m.name or "", spec.driver, pool.name, pool.generation or 0, spec.nodeName or "", tuple(devices)
    )


def pod_claims(
    spec: list[wire.PodResourceClaim], st: list[wire.PodResourceClaimStatus] | None
) -> tuple[PodClaim, ...]:
    """Return a pod's claims, a template's claim named by the status once the controller made it."""
    made = {s.name: s.resourceClaimName or "" for s in st or ()}
    return tuple(
        PodClaim(
            intern(pc.name),
            pc.resourceClaimName or made.get(pc.name, ""),
            intern(pc.resourceClaimTemplateName or ""),
        )
        for pc in spec
    )


def readers(ctx: Reading) -> dict[str, KindReader]:
    """Return how this form decodes each of its kinds, by kind name."""
    return {
        kinds.DEVICE_CLASS.name: KindReader(reader("DeviceClass", DeviceClassObj, device_class)),
        kinds.RESOURCE_CLAIM.name: KindReader(reader("ResourceClaim", ResourceClaimObj, resource_claim)),
        kinds.RESOURCE_CLAIM_TEMPLATE.name: KindReader(
            reader("ResourceClaimTemplate", ResourceClaimTemplate, claim_template)
        ),
        kinds.RESOURCE_SLICE.name: KindReader(reader("ResourceSlice", ResourceSliceObj, resource_slice)),
    }
