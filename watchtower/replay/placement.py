"""Where a job's pods go: the nodes' free room and the fit of a job's pods on it, the fullest node first (or
the emptiest, as kube-scheduler's LeastAllocated). No state of a run: the engine keeps one Cluster."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from .policy import ReplayPolicy

MIB = 2**20


@dataclass(frozen=True, slots=True)
class Need:
    pods: int
    gpus: int  # per pod
    cpu: float  # millicores per pod (0: not asked)
    memory: float  # bytes per pod (0: not asked)
    least: int = 0  # fewest pods it may start with (a gang's minimum); 0: all of them
    loose: bool = False  # its pods placed one by one as each fits (no gang: policy `gangs: declared`)

    @property
    def fewest(self) -> int:
        return self.least or self.pods

    def capped(self, pods: int) -> Need:
        """Return this need with at most `pods` pods (a quota's room), keeping its minimum."""
        return (
            self
            if pods >= self.pods
            else Need(pods, self.gpus, self.cpu, self.memory, self.fewest, self.loose)
        )

    def pod(self) -> Need:
        """Return one of its pods, placed alone."""
        return Need(1, self.gpus, self.cpu, self.memory)


def covers(failed: Need, need: Need) -> bool:
    """Return whether `need` asks at least as much as `failed` in every way, so it cannot fit where `failed`
    did not. A job placed pod by pod may place a pod where a gang did not fit."""
    if need.loose and not failed.loose:
        return False
    return (
        need.pods >= failed.pods
        and need.fewest >= failed.fewest
        and need.gpus >= failed.gpus
        and need.cpu >= failed.cpu
        and need.memory >= failed.memory
    )


def fit(
    need: Need,
    gpus: Sequence[float],
    cpu: Sequence[float],
    memory: Sequence[float],
    spread: bool = False,
) -> list[tuple[int, int]] | None:
    """Return [(node, pods)] placing the pods of `need` on nodes with these free amounts, the fullest node
    that fits first (`spread`: the emptiest, as kube-scheduler's LeastAllocated): all of them, or as many as
    fit when at least its minimum does; None otherwise."""

    def room(n: int) -> int:
        k = int(gpus[n] // need.gpus) if need.gpus else need.pods
        if need.cpu:
            k = min(k, int(cpu[n] // need.cpu))
        if need.memory:
            k = min(k, int(memory[n] // need.memory))
        return k

    if need.pods == 1:  # the common case: one scan for the fullest (or emptiest) node with room
        best = -1
        for n, g in enumerate(gpus):
            if (
                g >= need.gpus
                and (best < 0 or (g > gpus[best] if spread else g < gpus[best]))
                and room(n) > 0
            ):
                best = n
        return [(best, 1)] if best >= 0 else None
    left, out = need.pods, []
    order = (lambda n: (-gpus[n], n)) if spread else (lambda n: (gpus[n], n))
    for n in sorted(range(len(gpus)), key=order):
        if gpus[n] < need.gpus or (k := room(n)) <= 0:
            continue
        take = min(k, left)
        out.append((n, take))
        left -= take
        if left == 0:
            return out
    return out if need.pods - left >= need.fewest else None


class Cluster:
    """The nodes' capacity and what is free of it."""

    def __init__(self, policy: ReplayPolicy) -> None:
        nodes = policy.node_list()
        self.spread = policy.scoring == "LeastAllocated"
        self.gpus = [float(n.gpus) for n in nodes]
        self.cpu = [n.cpu * 1000 if n.cpu is not None else math.inf for n in nodes]
        self.memory = [n.memory_gib * 1024 * MIB if n.memory_gib is not None else math.inf for n in nodes]
        self.free_gpus = list(self.gpus)
        self.free_cpu = list(self.cpu)
        self.free_memory = list(self.memory)
        self.capacity = sum(n.gpus for n in nodes)
        self.total_free = self.capacity

    def placement(self, need: Need) -> list[tuple[int, int]] | None:
        return fit(need, self.free_gpus, self.free_cpu, self.free_memory, self.spread)

    def take(self, need: Need, where: Sequence[tuple[int, int]], sign: int = 1) -> None:
        for n, pods in where:
            self.free_gpus[n] -= sign * pods * need.gpus
            self.free_cpu[n] -= sign * pods * need.cpu
            self.free_memory[n] -= sign * pods * need.memory
            self.total_free -= sign * pods * need.gpus

    def never_fits(self, need: Need) -> str | None:
        """Return why a job could not run even on the empty cluster, or None."""
        one = Need(1, need.gpus, need.cpu, need.memory)
        need = Need(need.fewest, need.gpus, need.cpu, need.memory)  # a partial gang may run on its minimum
        if fit(one, self.gpus, self.cpu, self.memory) is None:
            what = f"{need.gpus} GPUs"
            if need.cpu or need.memory:
                what += f", {need.cpu / 1000:g} CPUs and {need.memory / 2**30:g} GiB"
            largest = max(self.gpus, default=0)
            return f"a pod asks {what}; no node has that much (the largest has {largest:g} GPUs)"
        if fit(need, self.gpus, self.cpu, self.memory) is None:
            return f"its {need.pods} pods of {need.gpus} GPUs do not fit on the whole cluster ({self.capacity} GPUs)"
        return None
