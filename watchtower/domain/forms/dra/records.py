"""GPUs asked for and offered through Dynamic Resource Allocation (resource.k8s.io/v1, DESIGN §3.16).

A pod that asks its GPUs through ResourceClaims requests no `nvidia.com/gpu`: its GPUs are the device
requests of its claims (or of the ResourceClaimTemplate a claim is made from) whose DeviceClass is a GPU
class, and capacity is what ResourceSlices publish. The field names are upstream's (k8s.io/api
resource/v1/types.go; core/v1 PodResourceClaim and PodResourceClaimStatus).

Counting rules, documented in docs/json.md:
- `exactly.count` (1 when unset) devices per request; `allocationMode: All` asks every matching device,
  counted before allocation as the most one node's slices offer of that class (a pod lands on one node);
- `firstAvailable`: the first subrequest until allocated, then the subrequest the scheduler chose;
- an allocated claim counts the devices of GPU classes in `status.allocation.devices.results`.
- A MIG class (e.g. `mig.nvidia.com`) counts only when configured: each MIG device is then one GPU
  slice. It is off by default because NVIDIA's driver publishes a GPU and its MIG partitions side by
  side, and counting both would count the same silicon twice in capacity.
"""

from __future__ import annotations

import re

import msgspec

GPU_DEVICE_CLASS = "gpu.nvidia.com"  # NVIDIA's DRA driver (k8s-dra-driver-gpu deviceclass-gpu.yaml)
ALL = -1  # DeviceRequest.count of `allocationMode: All`


class DeviceRequest(msgspec.Struct, frozen=True, gc=False):
    """One device request of a claim, or one `firstAvailable` subrequest (`subrequests` then empty)."""

    name: str
    device_class: str = ""
    count: int = 1  # ALL for allocationMode All
    subrequests: tuple[DeviceRequest, ...] = ()  # firstAvailable, in the user's order of preference

    def chosen(self, result_request: str) -> DeviceRequest:
        """Return the request an allocation result names: "req" or, for firstAvailable, "req/sub"."""
        if not self.subrequests:
            return self
        _, _, sub = result_request.partition("/")
        return next((s for s in self.subrequests if s.name == sub), self.subrequests[0])

    @property
    def first(self) -> DeviceRequest:
        """Return the request as it stands before allocation: the first subrequest of a firstAvailable."""
        return self.subrequests[0] if self.subrequests else self


class AllocatedDevice(msgspec.Struct, frozen=True, gc=False):
    """One `status.allocation.devices.results` item."""

    request: str
    driver: str
    pool: str
    device: str

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


class ResourceClaim(msgspec.Struct, frozen=True, gc=False):
    """A ResourceClaim (its requests and allocation) or a ResourceClaimTemplate (requests only)."""

    namespace: str
    name: str
    requests: tuple[DeviceRequest, ...] = ()
    allocated: bool = False
    devices: tuple[AllocatedDevice, ...] = ()
    deleting: bool = False  # metadata.deletionTimestamp: the scheduler refuses it (PreEnqueue)


class PodClaim(msgspec.Struct, frozen=True, gc=False):
    """One `spec.resourceClaims` item: the claim it names, or the template its claim is made from."""

    name: str
    claim: str = ""  # resourceClaimName, or the generated name from status.resourceClaimStatuses
    template: str = ""  # resourceClaimTemplateName


class DeviceClass(msgspec.Struct, frozen=True, gc=False):
    """A DeviceClass, reduced to what its CEL selectors say in the plain forms drivers publish."""

    name: str
    drivers: tuple[str, ...] = ()  # `device.driver == "..."`
    # `device.attributes["<domain>"].<name> == "<value>"` as ("<domain>/<name>", value)
    attributes: tuple[tuple[str, str], ...] = ()


class SliceDevice(msgspec.Struct, frozen=True, gc=False):
    name: str
    attributes: tuple[tuple[str, str], ...] = ()  # string attributes, qualified "<domain>/<name>"


class ResourceSlice(msgspec.Struct, frozen=True, gc=False):
    name: str
    driver: str
    pool: str
    generation: int = 0
    node: str = ""  # spec.nodeName; "" for network-attached pools (nodeSelector / allNodes)
    devices: tuple[SliceDevice, ...] = ()


class GpuClaim(msgspec.Struct, frozen=True, gc=False):
    """One claim of a workload, as the JSON shows it (`gpu_claims`)."""

    name: str
    device_class: str
    count: int
    allocated: bool
    devices: tuple[str, ...] = ()  # "driver/pool/device"


class UnresolvedClaim(msgspec.Struct, frozen=True, gc=False):
    """A pod the DynamicResources plugin cannot place because a claim, template or class it names is not
    there: its GPUs are unknown, so it is no workload; `dra_problems` in the JSON lists it."""

    namespace: str
    pod: str
    uid: str
    owner_kind: str
    owner_name: str
    reason: str  # one of UNRESOLVED_REASONS
    why: str
    created: float


# Bounded: the `reason` label of watchtower_dra_unresolved_pods.
CLAIM_MISSING = "claim_missing"
TEMPLATE_MISSING = "template_missing"
CLAIM_DELETING = "claim_deleting"
CLASS_MISSING = "class_missing"
UNRESOLVED_REASONS = (CLAIM_MISSING, TEMPLATE_MISSING, CLAIM_DELETING, CLASS_MISSING)


_DRIVER = re.compile(r"""device\.driver\s*==\s*["']([^"']+)["']""")
_ATTRIBUTE = re.compile(r"""device\.attributes\[\s*["']([^"']+)["']\s*\]\.(\w+)\s*==\s*["']([^"']*)["']""")


def class_from_selectors(name: str, expressions: list[str]) -> DeviceClass:
    """Return a DeviceClass with the driver and string-attribute equalities its CEL selectors require.

    Only `==` clauses joined by `&&` are read; any other clause (ranges, `||`, functions) is not
    evaluated, so such a class may count more devices than the scheduler would hand out for it."""
    drivers: list[str] = []
    attributes: list[tuple[str, str]] = []
    for expr in expressions:
        if "||" in expr:
            continue  # an alternative: no clause of it is required
        drivers.extend(_DRIVER.findall(expr))
        attributes.extend((f"{dom}/{attr}", value) for dom, attr, value in _ATTRIBUTE.findall(expr))
    return DeviceClass(name, tuple(dict.fromkeys(drivers)), tuple(dict.fromkeys(attributes)))


def matches(cls: DeviceClass | None, class_name: str, driver: str, device: SliceDevice) -> bool:
    """Return True when a published device belongs to a class; an unseen class is its driver's name."""
    if cls is None:
        return driver == class_name
    if cls.drivers and driver not in cls.drivers:
        return False
    if not cls.drivers and not cls.attributes:
        return driver == class_name
    have = dict(device.attributes)
    return all(have.get(k) == v for k, v in cls.attributes)
