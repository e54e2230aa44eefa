"""The DRA parts of the simulated cluster: NVIDIA's driver publishing a ResourceSlice per DRA-only node, the
ResourceClaimTemplates users submit with their jobs, and the resourceclaim controller.

What it imitates (kubernetes v1.36.3 pkg/controller/resourceclaim/controller.go): a pod naming a template
gets a claim made for it, owned by it, and its `status.resourceClaimStatuses` names that claim; until then
the DynamicResources plugin holds the pod before the queue (binding.py skips it). The scheduler writes
the claim's allocation when it binds the pod (`bound`); once the pod is done or gone the controller
removes the reservation and deletes the claim it made. The DRA-only nodes (`dra_nodes` of the config) are
the driver's: it adds them after the cluster's own, their GPUs in `store.device_gpus`.
"""

from __future__ import annotations

import random
import string
from typing import TYPE_CHECKING, Any

from watchtower.simulator import objects as obj
from watchtower.simulator.forms.dra import objects as dro
from watchtower.simulator.hooks import FormController

if TYPE_CHECKING:
    from watchtower.simulator.pods import SimPod, SimWorkload
    from watchtower.simulator.store import Store
    from watchtower.simulator.workloads import WorkloadSpec

KINDS = ("DeviceClass", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim")


class DraDriver(FormController):
    """The DRA objects of the cluster and the controller acting on them."""

    # A frozenset, as the kinds were stamped in its order before the forms had hooks: the same seed's
    # resourceVersions stay as they were.
    kinds = frozenset(KINDS)

    def __init__(self, seed: int, created: float) -> None:
        # Its own random source: generated names here leave the rest of a seeded story as it was.
        self._rng = random.Random(f"dra/{seed}")
        self.device_class = dro.device_class(created)
        self.slices: dict[str, dict[str, Any]] = {}  # by node
        self.gpus: dict[str, int] = {}  # GPU devices per DRA node
        self.templates: dict[tuple[str, str], dict[str, Any]] = {}
        self.claims: dict[str, dict[str, Any]] = {}  # by the uid of the pod it was made for

    @property
    def enabled(self) -> bool:
        return bool(self.slices)

    def _suffix(self) -> str:
        return "".join(self._rng.choice(string.ascii_lowercase + string.digits) for _ in range(5))

    def add_nodes(self, store: Store, created: float) -> None:
        cfg = store.config
        for j in range(cfg.dra_nodes):
            # NVIDIA's DRA driver on these: no `nvidia.com/gpu`, the GPUs are its ResourceSlice's devices.
            i = cfg.nodes + j
            name = f"dra-node-{j:02d}"
            n = obj.node(
                name,
                gpus=0,
                cpu=str(16 * cfg.gpus_per_node),
                memory=f"{96 * cfg.gpus_per_node}Gi",
                created=created,
            )
            for part in ("allocatable", "capacity"):
                del n["status"][part]["nvidia.com/gpu"]
            n["status"]["addresses"] = [
                {"type": "InternalIP", "address": f"10.0.{i // 250}.{i % 250 + 1}"},
                {"type": "Hostname", "address": name},
            ]
            store.nodes[name] = n
            self.add_node(n, cfg.gpus_per_node, created)
            store.device_gpus[name] = cfg.gpus_per_node

    def standing(self) -> list[dict[str, Any]]:
        return [o for k in self.kinds for o in self.objects(k)]

    def add_node(self, node: dict[str, Any], gpus: int, created: float) -> None:
        """Publish a node's GPUs as a ResourceSlice (the node itself then has no `nvidia.com/gpu`)."""
        name = node["metadata"]["name"]
        self.slices[name] = dro.resource_slice(node, gpus, self._suffix(), created)
        self.gpus[name] = gpus

    def objects(self, kind: str) -> list[dict[str, Any]]:
        if not self.enabled:
            return []
        if kind == "DeviceClass":
            return [self.device_class]
        if kind == "ResourceSlice":
            return list(self.slices.values())
        if kind == "ResourceClaimTemplate":
            return list(self.templates.values())
        return list(self.claims.values())

    def submitted(self, store: Store, w: SimWorkload) -> None:
        self.template(store, w.spec)

    def template(self, store: Store, spec: WorkloadSpec) -> None:
        """Create the template a job's pods name, as its user applies it beside the job."""
        key = (spec.namespace, spec.claim_template)
        if not spec.claim_template or key in self.templates:
            return
        body = dro.claim_template(spec.namespace, spec.claim_template, spec.pods[0].gpus, store.now())
        self.templates[key] = body
        store.emit("ResourceClaimTemplate", body, "ADDED")

    def reconcile(self, store: Store, t: float) -> None:
        """Make the claims new pods need; delete those whose pod is done or gone."""
        for uid, claim in list(self.claims.items()):
            p = store.pods.get(uid)
            if p is None or p.terminal or (p.terminating and not p.node):
                del self.claims[uid]
                if p is not None:
                    p.claim = None
                store.emit("ResourceClaim", claim, "DELETED")
        for p in store.pods.values():
            if p.claim is None and p.dra_gpus and not p.terminal and not p.terminating:
                claim = dro.pod_claim(p.namespace, p.name, p.uid, p.dra_gpus, self._suffix(), t)
                self.claims[p.uid] = p.claim = claim
                store.emit("ResourceClaim", claim, "ADDED")
                store.emit_pod(p, "MODIFIED")

    def bound(self, store: Store, p: SimPod, t: float) -> None:
        if p.dra_gpus:
            self.allocate(store, p, t)

    def allocate(self, store: Store, p: SimPod, t: float) -> None:
        """Write the claim's allocation for the devices the pod was bound with (the scheduler's PreBind)."""
        claim = self.claims.get(p.uid)
        if claim is None:
            return
        claim["status"] = dro.allocation(p.node, list(p.gpu_ids), p.name, p.uid, t)
        store.emit("ResourceClaim", claim, "MODIFIED")


def controller(store: Store, created: float) -> DraDriver:
    return DraDriver(store.config.seed, created)
