"""GPU capacity per node and fragmentation of the free GPUs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NamedTuple

from watchtower.domain.records import Node


class NodeCapacity(NamedTuple):
    """One node's GPUs. A tuple: a tick makes one per GPU node (thousands), so it must be cheap to build."""

    name: str
    allocatable: int
    used: int
    schedulable: bool
    dra: int = 0  # of `allocatable`, the GPUs its ResourceSlices publish (DRA)

    @property
    def free(self) -> int:
        return max(0, self.allocatable - self.used) if self.schedulable else 0


@dataclass(frozen=True, slots=True)
class Capacity:
    nodes: tuple[NodeCapacity, ...]
    # Totals computed once: a tick asks for them per waiting workload (20,000 × 2,000 nodes otherwise).
    allocatable: int = field(init=False)
    used: int = field(init=False)
    dra: int = field(init=False)  # of `allocatable`, published through ResourceSlices
    free_total: int = field(init=False)
    largest_free: int = field(init=False)

    def __post_init__(self) -> None:
        free = [max(0, n.allocatable - n.used) if n.schedulable else 0 for n in self.nodes]
        object.__setattr__(self, "allocatable", sum(n.allocatable for n in self.nodes))
        object.__setattr__(self, "used", sum(n.used for n in self.nodes))
        object.__setattr__(self, "dra", sum(n.dra for n in self.nodes))
        object.__setattr__(self, "free_total", sum(free))
        object.__setattr__(self, "largest_free", max(free, default=0))

    def fragmented(self, gpus_per_pod: int) -> bool:
        """True when the cluster has enough free GPUs in total but no single node has them."""
        return 0 < gpus_per_pod <= self.free_total and gpus_per_pod > self.largest_free


def capacity(
    nodes: Mapping[str, Node], gpus_used: Mapping[str, int], dra_gpus: Mapping[str, int] | None = None
) -> Capacity:
    """Return allocatable and used GPUs per GPU node, by name; a cordoned node counts as having none free.

    `dra_gpus`: the GPUs each node's ResourceSlices publish, added to its `nvidia.com/gpu` (DESIGN §3.16)."""
    used = gpus_used.get
    dra = (dra_gpus or {}).get
    out = [
        NodeCapacity(name, n.gpus + dra(name, 0), used(name, 0), not n.unschedulable, dra(name, 0))
        for name, n in sorted(nodes.items())
        if n.gpus > 0 or used(name, 0) > 0 or dra(name, 0) > 0
    ]
    return Capacity(tuple(out))
