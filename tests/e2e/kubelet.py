"""A kubelet stand-in: registers GPU Nodes and plays the kubelet's part in the pod lifecycle.

What it does, as a real kubelet would as seen from the API: a bound pod is set Running (status
subresource: phase, startTime, Ready/ContainersReady, a running container); a pod whose annotation
`RUN_SECONDS` says so finishes Succeeded after that long; a terminating pod (deletionTimestamp set) is
deleted with grace 0 after `TERMINATE_SECONDS` (a checkpointing training pod takes a while). No containers
run. It polls the pod list rather than watching: with a few dozen pods on loopback that is cheap, and
timers fall out of the same loop.
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime
from typing import Any

import httpx

from tests.e2e.api import Api, ApiError
from tests.e2e.dra import ROOT as DRA_ROOT
from tests.e2e.dra import resource_slice
from tests.e2e.standin import StandIn

RUN_SECONDS = "e2e.watchtower.dev/run-seconds"
TERMINATE_SECONDS = "e2e.watchtower.dev/terminate-seconds"

log = logging.getLogger(__name__)


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def node_object(
    name: str, *, gpus: int, cpu: str = "64", memory: str = "512Gi", pods: int = 110
) -> dict[str, Any]:
    """Return a Node; `gpus` of 0 advertises no `nvidia.com/gpu` at all (a DRA-only node's GPUs are in its
    ResourceSlice, and NVIDIA's DRA driver replaces the device plugin rather than running beside it)."""
    resources = {"cpu": cpu, "memory": memory, "pods": str(pods)}
    if gpus:
        resources["nvidia.com/gpu"] = str(gpus)
    now = rfc3339(time.time())
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "e2e.watchtower.dev/node": "true"},
        },
        "spec": {},
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "kubelet stand-in",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        },
    }


class Kubelet(StandIn):
    name = "kubelet-stand-in"
    interval = 0.3

    def __init__(self, api: Api, *, terminate_seconds: float = 1.0) -> None:
        super().__init__()
        self.api = api
        self.terminate_seconds = terminate_seconds  # default delay before a terminating pod is gone
        self.nodes: set[str] = set()
        self.slices: dict[str, str] = {}  # node -> the ResourceSlice published for its DRA GPUs
        self.disconnects = 0
        self._terminating_seen: dict[str, float] = {}

    def register(self, name: str, *, gpus: int, dra_gpus: int = 0, **kw: Any) -> dict[str, Any]:
        """Create the Node; with `dra_gpus`, also publish its ResourceSlice as a DRA kubelet plugin does."""
        node: dict[str, Any] = self.api.create("/api/v1/nodes", node_object(name, gpus=gpus, **kw))
        self.nodes.add(name)
        if dra_gpus:
            s = self.api.create(
                f"{DRA_ROOT}/resourceslices", resource_slice(name, node["metadata"]["uid"], gpus=dra_gpus)
            )
            self.slices[name] = s["metadata"]["name"]
        return node

    def unregister(self, name: str) -> None:
        # The garbage collector would remove the slice with its Node; the next scenario should not wait.
        slice_name = self.slices.pop(name, None)
        if slice_name:
            self.api.delete(f"{DRA_ROOT}/resourceslices/{slice_name}")
        self.api.delete(f"/api/v1/nodes/{name}")
        self.nodes.discard(name)

    def unregister_all(self) -> None:
        for name in sorted(self.nodes):
            self.unregister(name)

    def run_once(self) -> None:
        self.sync(time.time())

    def passing(self, e: Exception) -> bool:
        # The API server restarting (scenario 6); a 503 "apiserver is shutting down" is the same restart
        # seen a moment earlier.
        if isinstance(e, httpx.TransportError) or (isinstance(e, ApiError) and e.status == 503):
            self.disconnects += 1
            return True
        return False

    def sync(self, now: float) -> None:
        """One pass over the pods bound to our nodes."""
        seen: set[str] = set()
        for pod in self.api.items("/api/v1/pods"):
            node = pod["spec"].get("nodeName")
            if not node or node not in self.nodes:
                continue
            meta, status = pod["metadata"], pod.get("status") or {}
            uid = meta["uid"]
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            phase = status.get("phase", "Pending")
            notes = meta.get("annotations") or {}
            try:
                if meta.get("deletionTimestamp"):
                    seen.add(uid)
                    first = self._terminating_seen.setdefault(uid, now)
                    delay = float(notes.get(TERMINATE_SECONDS, self.terminate_seconds))
                    if now - first >= delay:
                        self.api.delete(path, grace=0, preconditions={"uid": uid})
                elif phase == "Pending":
                    self.api.patch_status(path, self._running(pod, now))
                elif phase == "Running" and RUN_SECONDS in notes:
                    started = status.get("startTime")
                    t0 = (
                        datetime.fromisoformat(started.replace("Z", "+00:00")).timestamp() if started else now
                    )
                    if now - t0 >= float(notes[RUN_SECONDS]):
                        self.api.patch_status(path, self._succeeded(pod, now))
            except ApiError as e:
                if e.status not in (404, 409):  # gone or changed under us: next pass sees the new state
                    raise
        for uid in [u for u in self._terminating_seen if u not in seen]:
            del self._terminating_seen[uid]

    @staticmethod
    def _containers(pod: dict[str, Any], state: dict[str, Any], *, ready: bool) -> list[dict[str, Any]]:
        return [
            {
                "name": c["name"],
                "image": c.get("image", ""),
                "imageID": "",
                "ready": ready,
                "restartCount": 0,
                "started": ready,
                "state": state,
            }
            for c in pod["spec"]["containers"]
        ]

    def _running(self, pod: dict[str, Any], now: float) -> dict[str, Any]:
        t = rfc3339(now)
        return {
            "status": {
                "phase": "Running",
                "startTime": t,
                "hostIP": "127.0.0.1",
                "podIP": "10.244.0.1",
                "conditions": [
                    {"type": "Initialized", "status": "True", "lastTransitionTime": t},
                    {"type": "Ready", "status": "True", "lastTransitionTime": t},
                    {"type": "ContainersReady", "status": "True", "lastTransitionTime": t},
                ],
                "containerStatuses": self._containers(pod, {"running": {"startedAt": t}}, ready=True),
            }
        }

    def _succeeded(self, pod: dict[str, Any], now: float) -> dict[str, Any]:
        t = rfc3339(now)
        started = (pod.get("status") or {}).get("startTime") or t
        done = {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": started, "finishedAt": t}}
        return {
            "status": {
                "phase": "Succeeded",
                "conditions": [
                    {"type": "Ready", "status": "False", "reason": "PodCompleted", "lastTransitionTime": t},
                    {
                        "type": "ContainersReady",
                        "status": "False",
                        "reason": "PodCompleted",
                        "lastTransitionTime": t,
                    },
                ],
                "containerStatuses": self._containers(pod, done, ready=False),
            }
        }
