"""The DRA part of the tick benchmark: pods asking GPUs only through ResourceClaims, and the slices offering them.

Shaped from the real captures (tests/fixtures/real/dra): one claim per pod on class gpu.nvidia.com; the
waiting ones carry the DynamicResources plugin's real words, the bound ones an allocated claim.
"""

from __future__ import annotations

import random
import sys
from dataclasses import dataclass, field

from watchtower.domain.forms.dra.records import (
    AllocatedDevice,
    DeviceRequest,
    PodClaim,
    ResourceClaim,
    ResourceSlice,
    SliceDevice,
    class_from_selectors,
)
from watchtower.domain.records import Condition, Node, OwnerRef, Pod
from watchtower.domain.state import ClusterState

CLASS = class_from_selectors(
    "gpu.nvidia.com",
    ["device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'"],
)
DRIVER = "gpu.nvidia.com"
REQUEST = "gpus"
MESSAGE = (
    "0/{n} nodes are available: {n} cannot allocate all claims. still not schedulable, "
    "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
)


@dataclass
class Dra:
    nodes: list[Node] = field(default_factory=list)  # no nvidia.com/gpu: their GPUs are the slices'
    slices: list[ResourceSlice] = field(default_factory=list)
    claims: list[ResourceClaim] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)


def build_dra(rnd: random.Random, n_pods: int, now: float, *, nodes: int = 2000, per_node: int = 8) -> Dra:
    """Return `n_pods` DRA pods, half waiting and half bound, on `nodes` DRA-only nodes of `per_node` GPUs."""
    out = Dra()
    gpu = (("gpu.nvidia.com/type", "gpu"),)
    for i in range(nodes):
        node = f"dra-node-{i:04d}"
        out.nodes.append(Node(node, gpus=0, cpu_millis=96_000, memory_bytes=768 << 30, pods=110))
        devices = tuple(SliceDevice(f"gpu-{d}", gpu) for d in range(per_node))
        out.slices.append(ResourceSlice(f"{node}-gpu.nvidia.com-x", "gpu.nvidia.com", node, 1, node, devices))
    free = {s.node: per_node for s in out.slices}
    device_names = [sys.intern(f"gpu-{d}") for d in range(per_node)]
    requests = {n: (DeviceRequest(REQUEST, DRIVER, n),) for n in (1, 2, 4)}
    message = MESSAGE.format(n=nodes)
    for i in range(n_pods):
        ns = f"dra-team-{i % 40:02d}"
        job = f"dra-job-{i // 4:05d}"  # four pods a job, like the bench's other Jobs
        want = rnd.choice((1, 2, 4))
        name = f"{job}-{i % 4}-gpus"
        node = ""
        if i % 2:
            node = next((n for n, k in free.items() if k >= want), "")
        if node:
            first = per_node - free[node]
            free[node] -= want
            # The strings shared as the decoder interns them: driver, request, pool and device names.
            devs = tuple(AllocatedDevice(REQUEST, DRIVER, node, device_names[first + d]) for d in range(want))
            claim = ResourceClaim(ns, name, requests[want], True, devs)
            cond = Condition("True", since=now - 3600)
        else:
            claim = ResourceClaim(ns, name, requests[want])
            cond = Condition("False", "Unschedulable", message, now - rnd.uniform(60, 7200))
        out.claims.append(claim)
        out.pods.append(
            Pod(
                uid=f"dra-pod-{i}",
                namespace=ns,
                name=f"{job}-{i % 4}",
                created=now - rnd.uniform(7200, 9000),
                phase="Running" if node else "Pending",
                priority=500_000,
                priority_class="experiment",
                node=node,
                owner=OwnerRef("Job", job, "batch/v1", f"job-{job}"),
                scheduled=cond,
                claims=(PodClaim(REQUEST, name),),
                running_since=now - 3500 if node else None,
            )
        )
    return out


def load_dra(state: ClusterState, dra: Dra) -> None:
    """Apply as the service lists them: class and slices, claims, then the pods."""
    for n in dra.nodes:
        state.upsert_node(n)
    state.forms.dra.upsert_class(CLASS)
    for s in dra.slices:
        state.forms.dra.upsert_slice(s)
    for c in dra.claims:
        state.forms.dra.upsert_claim(c)
    for p in dra.pods:
        state.upsert_pod(p)
