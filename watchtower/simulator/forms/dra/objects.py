"""DRA objects as the API server serves them (resource.k8s.io/v1): a DeviceClass, a node's ResourceSlice, a
ResourceClaimTemplate and the ResourceClaim the resourceclaim controller makes from it.

Shapes from the real captures (tests/fixtures/real/dra, the API server and scheduler of v1.36.3): the
DeviceClass of NVIDIA's chart (one CEL selector on driver and `type`), a slice per node named
`<node>-<driver>-<5>` owned by its Node with pool = the node's name, a template claim named
`<pod>-<pod claim>-<5>` owned by its pod (kubernetes pkg/controller/resourceclaim/controller.go
handleClaim: generateName), annotated with the pod's claim name, its allocation written by the scheduler.
"""

from __future__ import annotations

from typing import Any

from watchtower.simulator.objects import new_uid, owner_ref, ts

DRA_API = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"  # NVIDIA's DRA driver, also the name of its GPU DeviceClass
POD_CLAIM = "gpus"  # the pod's spec.resourceClaims[].name the simulated jobs use
DELETE_PROTECTION = "resource.kubernetes.io/delete-protection"


def _meta(name: str, namespace: str | None, created: float, uid: str) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": name,
        "uid": uid,
        "resourceVersion": "1",
        "creationTimestamp": ts(created),
    }
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def device_class(created: float) -> dict[str, Any]:
    expr = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
    return {
        "apiVersion": DRA_API,
        "kind": "DeviceClass",
        "metadata": _meta(DRIVER, None, created, new_uid(f"deviceclass/{DRIVER}")),
        "spec": {"selectors": [{"cel": {"expression": expr}}]},
    }


def resource_slice(node: dict[str, Any], gpus: int, suffix: str, created: float) -> dict[str, Any]:
    """The slice NVIDIA's kubelet plugin publishes for a node: one device per GPU, all in one pool."""
    name = node["metadata"]["name"]
    devices = [
        {
            "name": f"gpu-{i}",
            "attributes": {
                "type": {"string": "gpu"},
                "productName": {"string": "NVIDIA H100 80GB HBM3"},
                "pcieBusID": {"string": f"0000:{0x18 + 0x10 * i:02x}:00.0"},
            },
            "capacity": {"memory": {"value": "80Gi"}},
        }
        for i in range(gpus)
    ]
    meta = _meta(f"{name}-{DRIVER}-{suffix}", None, created, new_uid(f"slice/{name}"))
    meta["generateName"] = f"{name}-{DRIVER}-"
    meta["ownerReferences"] = [owner_ref("Node", name, api_version="v1", uid=node["metadata"]["uid"])]
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceSlice",
        "metadata": meta,
        "spec": {
            "driver": DRIVER,
            "nodeName": name,
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "devices": devices,
        },
    }


def claims_in_template(pod_template: dict[str, Any], template: str) -> None:
    """Make a pod spec (or a controller's pod template) ask its GPUs through a claim from `template`."""
    spec = pod_template["spec"]
    spec["resourceClaims"] = [{"name": POD_CLAIM, "resourceClaimTemplateName": template}]
    for c in spec["containers"]:
        c["resources"]["claims"] = [{"name": POD_CLAIM}]


def _requests(gpus: int) -> dict[str, Any]:
    exactly = {"allocationMode": "ExactCount", "count": gpus, "deviceClassName": DRIVER}
    return {"devices": {"requests": [{"name": POD_CLAIM, "exactly": exactly}]}}


def claim_template(namespace: str, name: str, gpus: int, created: float) -> dict[str, Any]:
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaimTemplate",
        "metadata": _meta(name, namespace, created, new_uid(f"template/{namespace}/{name}")),
        "spec": {"metadata": {}, "spec": _requests(gpus)},
    }


def pod_claim(
    namespace: str, pod: str, pod_uid: str, gpus: int, suffix: str, created: float
) -> dict[str, Any]:
    """The claim made for a pod's template entry, not allocated yet (`status: {}`)."""
    stem = f"{pod}-{POD_CLAIM}-"
    meta = _meta(stem + suffix, namespace, created, new_uid(f"claim/{namespace}/{pod_uid}"))
    meta["generateName"] = stem
    meta["annotations"] = {"resource.kubernetes.io/pod-claim-name": POD_CLAIM}
    meta["finalizers"] = [DELETE_PROTECTION]
    meta["ownerReferences"] = [owner_ref("Pod", pod, api_version="v1", uid=pod_uid)]
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": _requests(gpus),
        "status": {},
    }


def allocation(node: str, devices: list[int], pod: str, pod_uid: str, at: float) -> dict[str, Any]:
    """The claim status the scheduler writes before binding: the devices, where, and for whom."""
    results = [{"request": POD_CLAIM, "driver": DRIVER, "pool": node, "device": f"gpu-{i}"} for i in devices]
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    return {
        "allocation": {
            "allocationTimestamp": ts(at),
            "devices": {"results": results},
            "nodeSelector": {"nodeSelectorTerms": [term]},
        },
        "reservedFor": [{"resource": "pods", "name": pod, "uid": pod_uid}],
    }
