"""Capture what the real API server, scheduler and resource claim controller write for DRA GPUs, into
tests/fixtures/real/dra/*.json (kube v1.36.3, the e2e control plane's binaries):

    PYTHONPATH=$PWD .venv/bin/python -m tests.e2e.capture_dra

Two fake nodes with no `nvidia.com/gpu`, each a ResourceSlice of 4 GPUs of NVIDIA's DRA driver, and the
`gpu.nvidia.com` DeviceClass. Two pods hold all 8 GPUs (one through a ResourceClaim, one through a
ResourceClaimTemplate); a third asks for 2 more and cannot be allocated; one names a DeviceClass that does not
exist, one a ResourceClaim that does not exist. Then the first holder finishes: the controller deallocates its
claim and the waiting pod is allocated and runs. Each file is a List of what one step shows, self-contained
(nodes, class and slices included) so a fast test can read it alone; `managedFields` removed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e.api import Api, wait_for
from tests.e2e.controlplane.cluster import ControlPlane, binaries_dir
from tests.e2e.dra import (
    DRA_API,
    GPU_CLASS,
    ROOT,
    claim_pod,
    device_class,
    resource_claim,
    resource_claim_template,
)
from tests.e2e.kubelet import RUN_SECONDS, Kubelet
from tests.e2e.scenario import PRIORITY_CLASSES, write_fixture

NS = "e2e-dra"
NODES = ("dra-gpu-1", "dra-gpu-2")
GPUS_PER_NODE = 4
# Long enough that a condition or event, were one written, would be there (the scheduler sees a pod at once).
QUIET_SECONDS = 3.0


def _listed(objs: list[dict[str, Any]], kind: str, api_version: str) -> list[dict[str, Any]]:
    return [{**o, "kind": kind, "apiVersion": api_version} for o in objs]


def _condition(obj: dict[str, Any], type_: str) -> dict[str, Any] | None:
    return next((c for c in (obj.get("status") or {}).get("conditions") or [] if c["type"] == type_), None)


def unschedulable(api: Api, ns: str, name: str, contains: str = "") -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        p: dict[str, Any] = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        c = _condition(p, "PodScheduled")
        ok = c and c["status"] == "False" and contains in (c.get("message") or "")
        return p if ok else None

    found: dict[str, Any] = wait_for(f"{ns}/{name} PodScheduled=False with {contains!r}", probe, timeout=60)
    return found


def running(api: Api, ns: str, name: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        p: dict[str, Any] = api.get(f"/api/v1/namespaces/{ns}/pods/{name}")
        return p if (p.get("status") or {}).get("phase") == "Running" else None

    found: dict[str, Any] = wait_for(f"{ns}/{name} Running", probe, timeout=60)
    return found


class Snapshot:
    """Reads the cluster's DRA picture and writes it as fixture Lists."""

    def __init__(self, api: Api, ns: str) -> None:
        self.api, self.ns = api, ns

    def cluster(self) -> list[dict[str, Any]]:
        nodes = [n for n in self.api.items("/api/v1/nodes") if n["metadata"]["name"] in NODES]
        return (
            _listed(nodes, "Node", "v1")
            + _listed(
                [c for c in self.api.items(f"{ROOT}/deviceclasses") if c["metadata"]["name"] == GPU_CLASS],
                "DeviceClass",
                DRA_API,
            )
            + _listed(
                [s for s in self.api.items(f"{ROOT}/resourceslices") if s["spec"].get("nodeName") in NODES],
                "ResourceSlice",
                DRA_API,
            )
        )

    def namespace(self, pods: tuple[str, ...] | None = None) -> list[dict[str, Any]]:
        """Pods (all, or those named), every claim and template, and the events of the pods kept."""
        ns = self.ns
        all_pods = self.api.items(f"/api/v1/namespaces/{ns}/pods")
        kept = [p for p in all_pods if pods is None or p["metadata"]["name"] in pods]
        names = {p["metadata"]["name"] for p in kept}
        events = [
            e
            for e in self.api.items(f"/api/v1/namespaces/{ns}/events")
            if e["involvedObject"].get("kind") != "Pod" or e["involvedObject"]["name"] in names
        ]
        return (
            _listed(kept, "Pod", "v1")
            + _listed(self.api.items(f"{ROOT}/namespaces/{ns}/resourceclaims"), "ResourceClaim", DRA_API)
            + _listed(
                self.api.items(f"{ROOT}/namespaces/{ns}/resourceclaimtemplates"),
                "ResourceClaimTemplate",
                DRA_API,
            )
            + _listed(events, "Event", "v1")
        )

    def write(self, name: str, items: list[dict[str, Any]]) -> Path:
        return write_fixture(f"dra/{name}", {"kind": "List", "apiVersion": "v1", "items": items})


def capture() -> list[Path]:
    """Run the scenario on a control plane of its own and return the fixture files written."""
    cp = ControlPlane(Path(tempfile.mkdtemp(prefix="watchtower-dra-")), binaries_dir())
    cp.start()
    api = Api(cp.url, ca=cp.pki.ca_cert, cert=(cp.pki.admin_cert, cp.pki.admin_key))
    kubelet = Kubelet(api)
    try:
        for name, value, policy in PRIORITY_CLASSES:
            api.create(
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy},
            )
        kubelet.start()
        api.create(f"{ROOT}/deviceclasses", device_class())
        for node in NODES:
            kubelet.register(node, gpus=0, dra_gpus=GPUS_PER_NODE)
        api.create("/api/v1/namespaces", {"metadata": {"name": NS, "labels": {"team": "nlp"}}})
        wait_for(
            "ServiceAccount default", lambda: api.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default")
        )
        return list(_steps(api, Snapshot(api, NS)))
    finally:
        kubelet.stop()
        api.close()
        cp.stop()


def _steps(api: Api, snap: Snapshot) -> list[Path]:
    ns = NS
    pods, claims = f"/api/v1/namespaces/{ns}/pods", f"{ROOT}/namespaces/{ns}/resourceclaims"
    out: list[Path] = []

    # All 8 GPUs taken: one holder through a claim of its own, one through a template.
    api.create(claims, resource_claim("held-gpus", GPUS_PER_NODE))
    api.create(pods, claim_pod("holder", claim="held-gpus", priority_class="batch"))
    api.create(f"{ROOT}/namespaces/{ns}/resourceclaimtemplates", resource_claim_template("four-gpus", 4))
    api.create(pods, claim_pod("templated", template="four-gpus", priority_class="batch"))
    running(api, ns, "holder")
    templated = running(api, ns, "templated")
    wait_for(
        "templated's resourceClaimStatuses",
        lambda: api.get(f"{pods}/templated")["status"].get("resourceClaimStatuses"),
    )
    out.append(snap.write("template-claim-allocated", snap.cluster() + snap.namespace(("templated",))))
    del templated

    # A pod whose claim cannot be allocated: every GPU is taken.
    api.create(claims, resource_claim("waiting-gpus", 2))
    api.create(pods, claim_pod("waiting", claim="waiting-gpus", priority_class="experiment"))
    unschedulable(api, ns, "waiting", "cannot allocate all claims")
    wait_for(
        "a FailedScheduling event for waiting",
        lambda: [
            e
            for e in api.items(f"/api/v1/namespaces/{ns}/events")
            if e["reason"] == "FailedScheduling" and e["involvedObject"]["name"] == "waiting"
        ],
    )
    out.append(snap.write("gpus-all-taken", snap.cluster() + snap.namespace()))

    # Configuration problems: a claim naming a DeviceClass that does not exist; a pod naming a missing claim.
    api.create(claims, resource_claim("no-class-gpus", 1, device_class="missing.nvidia.com"))
    api.create(pods, claim_pod("no-class", claim="no-class-gpus", priority_class="experiment"))
    api.create(pods, claim_pod("no-claim", claim="absent-gpus", priority_class="experiment"))
    unschedulable(api, ns, "no-class")
    # The DynamicResources plugin's PreEnqueue holds a pod whose claim does not exist: no condition and no
    # event are written (pkg/scheduler/backend/queue: a pod failing PreEnqueue only waits in the queue).
    time.sleep(QUIET_SECONDS)
    silent = api.get(f"{pods}/no-claim")
    assert _condition(silent, "PodScheduled") is None, silent["status"]
    out.append(snap.write("missing-deviceclass", snap.cluster() + snap.namespace(("no-class",))))
    out.append(snap.write("missing-claim", snap.cluster() + snap.namespace(("no-claim",))))
    api.delete(f"{pods}/no-class", grace=0)
    api.delete(f"{pods}/no-claim", grace=0)

    # The holder finishes: its claim is deallocated by the controller, the waiting pod gets the GPUs.
    api.merge_patch(f"{pods}/holder", {"metadata": {"annotations": {RUN_SECONDS: "0"}}})
    running(api, ns, "waiting")
    wait_for(
        "held-gpus deallocated", lambda: api.get(f"{claims}/held-gpus")["status"].get("allocation") is None
    )
    out.append(snap.write("claim-allocated-after-holder-finished", snap.cluster() + snap.namespace()))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.parse_args(argv)
    for path in capture():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
