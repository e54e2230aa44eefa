"""DRA objects (resource.k8s.io/v1, GA in Kubernetes 1.34) as their writers make them: the DeviceClass a cluster
admin installs with NVIDIA's DRA driver, the ResourceSlice its kubelet plugin publishes for a node's GPUs, and
the ResourceClaim / ResourceClaimTemplate and pod a user writes.

Field names from k8s.io/api v0.36.3 resource/v1/types.go; device names and attributes as
NVIDIA/k8s-dra-driver-gpu publishes them (cmd/gpu-kubelet-plugin/deviceinfo.go GpuInfo.GetDevice: `gpu-<minor>`,
attributes type/uuid/productName/brand/architecture/cudaComputeCapability/driverVersion/cudaDriverVersion/
pcieBusID, capacity memory); the class selector is the one its Helm chart installs.
"""

from __future__ import annotations

import zlib
from typing import Any

DRA_API = "resource.k8s.io/v1"
GPU_DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
ROOT = f"/apis/{DRA_API}"


def device_class(name: str = GPU_CLASS, *, driver: str = GPU_DRIVER) -> dict[str, Any]:
    expression = f"device.driver == '{driver}' && device.attributes['{driver}'].type == 'gpu'"
    return {
        "apiVersion": DRA_API,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }


def gpu_device(node: str, minor: int) -> dict[str, Any]:
    """Return one whole-GPU device as the NVIDIA kubelet plugin describes an H100 80GB."""
    return {
        "name": f"gpu-{minor}",
        "attributes": {
            "type": {"string": "gpu"},
            # Stable per node and minor, shaped like nvidia-smi's GPU-<uuid>.
            "uuid": {"string": f"GPU-{zlib.crc32(node.encode()):08x}-0000-4000-8000-{minor:012d}"},
            "productName": {"string": "NVIDIA H100 80GB HBM3"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Hopper"},
            "cudaComputeCapability": {"version": "9.0.0"},
            "driverVersion": {"version": "570.124.6"},
            "cudaDriverVersion": {"version": "12.8.0"},
            "pcieBusID": {"string": f"0000:{0x18 + minor:02x}:00.0"},
        },
        "capacity": {"memory": {"value": "80Gi"}},
    }


def resource_slice(node: str, node_uid: str, *, gpus: int, driver: str = GPU_DRIVER) -> dict[str, Any]:
    """Return the one slice of `node`'s pool: `gpus` devices gpu-0..gpu-(n-1), owned by the Node.

    As k8s.io/dynamic-resource-allocation's resourceslice controller writes it for a kubelet plugin: pool
    named after the node, generation 1, one slice in the pool, the Node as owner (the slice goes with it).
    """
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceSlice",
        "metadata": {
            "generateName": f"{node}-{driver}-",
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
            ],
        },
        "spec": {
            "driver": driver,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [gpu_device(node, i) for i in range(gpus)],
        },
    }


def claim_spec(count: int, *, device_class: str = GPU_CLASS, request: str = "gpus") -> dict[str, Any]:
    return {
        "devices": {
            "requests": [
                {
                    "name": request,
                    "exactly": {
                        "deviceClassName": device_class,
                        "allocationMode": "ExactCount",
                        "count": count,
                    },
                }
            ]
        }
    }


def resource_claim(name: str, count: int, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": claim_spec(count, **kw),
    }


def resource_claim_template(name: str, count: int, **kw: Any) -> dict[str, Any]:
    return {
        "apiVersion": DRA_API,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name},
        "spec": {"spec": claim_spec(count, **kw)},
    }


def claim_pod(
    name: str,
    *,
    claim: str | None = None,
    template: str | None = None,
    priority_class: str | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Return a pod asking for GPUs through one claim (by name or from a template), and no nvidia.com/gpu."""
    ref: dict[str, Any] = {"name": "gpus"}
    if claim:
        ref["resourceClaimName"] = claim
    if template:
        ref["resourceClaimTemplateName"] = template
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "trainer",
                "image": "nvcr.io/nvidia/pytorch:25.01-py3",
                "resources": {"requests": {"cpu": "1", "memory": "1Gi"}, "claims": [{"name": "gpus"}]},
            }
        ],
        "resourceClaims": [ref],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": spec,
    }
