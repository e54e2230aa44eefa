"""Kubernetes resource quantities ("500m", "16Gi", 2) and the requests the scheduler counts for a pod."""

from __future__ import annotations

import math
import re
from decimal import Decimal, DecimalException

import msgspec

from .wire import Container, PodSpec, Qty, Resources

GPU = "nvidia.com/gpu"

_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}
# Kubernetes quantities are at most ~9.2e18 (int64 milli-units); far beyond that is garbage.
_QTY_EXP_LIMIT = 30
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)$")


def parse_quantity(q: Qty | None) -> Decimal:
    """Return a Kubernetes resource quantity ("500m", "16Gi", "2", 2) as a Decimal; raise ValueError."""
    if q is None:
        return Decimal(0)
    if isinstance(q, bool):
        raise ValueError(f"not a quantity: {q!r}")
    if isinstance(q, int | float):
        if isinstance(q, float) and not math.isfinite(q):
            raise ValueError(f"not a quantity: {q!r}")
        return _bounded(Decimal(str(q)), q)
    m = _QTY.match(q.strip())
    if m is None:
        raise ValueError(f"not a quantity: {q[:40]!r}")
    try:
        return _bounded(Decimal(m.group(1)), q) * _SUFFIX[m.group(2)]
    except DecimalException as e:  # InvalidOperation for "1.2.3"; Overflow is not a ValueError
        raise ValueError(f"not a quantity: {q[:40]!r}") from e


def _bounded(d: Decimal, q: Qty) -> Decimal:
    # "1e999999" is a valid Decimal, but turning it into an int takes seconds of CPU: hostile input.
    if d and not -_QTY_EXP_LIMIT <= d.adjusted() <= _QTY_EXP_LIMIT:
        raise ValueError(f"quantity out of range: {str(q)[:40]!r}")
    return d


def ceil_int(d: Decimal) -> int:
    return int(d.to_integral_value(rounding="ROUND_CEILING"))


def _request(r: Resources | None, resource: str) -> Decimal:
    if r is None:
        return Decimal(0)
    if r.requests and resource in r.requests:
        return parse_quantity(r.requests[resource])
    # Extended resources (and any resource with only a limit) default their request to the limit.
    if r.limits and resource in r.limits:
        return parse_quantity(r.limits[resource])
    return Decimal(0)


def _effective(
    containers: list[Resources | None],
    init: list[Resources | None],
    overhead: dict[str, Qty] | None,
    resource: str,
) -> Decimal:
    """The scheduler's effective request: max(sum of containers, largest init container) + overhead."""
    total = sum((_request(r, resource) for r in containers), Decimal(0))
    largest_init = max((_request(r, resource) for r in init), default=Decimal(0))
    return max(total, largest_init) + parse_quantity((overhead or {}).get(resource))


_RESOURCES_OF = msgspec.json.Decoder(Resources | None)
_OVERHEAD_OF = msgspec.json.Decoder(dict[str, Qty] | None)


def pod_sums(spec: PodSpec) -> tuple[int, int, int]:
    """Return (GPUs, CPU millis, memory bytes) the scheduler counts for the pod, parsing every quantity."""

    def parsed(cs: list[Container] | None) -> list[Resources | None]:
        return [_RESOURCES_OF.decode(c.resources) if len(c.resources) else None for c in cs or ()]

    containers, init = parsed(spec.containers), parsed(spec.initContainers)
    overhead = _OVERHEAD_OF.decode(spec.overhead) if len(spec.overhead) else None
    return (
        ceil_int(_effective(containers, init, overhead, GPU)),
        ceil_int(_effective(containers, init, overhead, "cpu") * 1000),
        ceil_int(_effective(containers, init, overhead, "memory")),
    )


def sums_key(spec: PodSpec) -> object:
    """Return what the pod's resource sums depend on: the JSON text of its containers' resources."""
    return (
        tuple([bytes(c.resources) for c in spec.containers or ()]),
        tuple([bytes(c.resources) for c in spec.initContainers or ()]),
        bytes(spec.overhead),
    )
