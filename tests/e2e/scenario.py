"""What every scenario does with the real cluster: its own namespaces and nodes, workloads, a dump, and
Watchtower's reading of that dump through the real command line."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tests.e2e.api import Api, ApiError, wait_for
from tests.e2e.dra import ROOT as DRA_ROOT
from tests.e2e.kubelet import RUN_SECONDS, TERMINATE_SECONDS, Kubelet
from tests.e2e.workloads import (
    K8S_SCHEDULING_API,
    VOLCANO_API,
    k8s_podgroup,
    k8s_workload,
    paddle_pod,
    paddlejob_object,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real"

# The tiers' example classes from the design (DESIGN §4).
PRIORITY_CLASSES = (
    ("urgent-debug", 1_000_000, "PreemptLowerPriority"),
    ("online-serving", 900_000, "PreemptLowerPriority"),
    ("experiment", 500_000, "PreemptLowerPriority"),
    ("long-training", 300_000, "Never"),
    ("batch", 100_000, "PreemptLowerPriority"),
)


def rfc3339(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def pod_manifest(
    name: str,
    *,
    gpus: int,
    priority_class: str | None = None,
    owner: dict[str, Any] | None = None,
    run_seconds: float | None = None,
    terminate_seconds: float | None = None,
    labels: dict[str, str] | None = None,
    node: str | None = None,
    gates: list[str] | None = None,
    group: str | None = None,
) -> dict[str, Any]:
    notes: dict[str, str] = {}
    if run_seconds is not None:
        notes[RUN_SECONDS] = str(run_seconds)
    if terminate_seconds is not None:
        notes[TERMINATE_SECONDS] = str(terminate_seconds)
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "trainer",
                "image": "paddlepaddle/paddle:2.6.1-gpu-cuda12.0-cudnn8.9-trt8.6",
                "resources": {
                    "requests": {"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": str(gpus)},
                    "limits": {"nvidia.com/gpu": str(gpus)},
                },
            }
        ],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 30,
    }
    if priority_class:
        spec["priorityClassName"] = priority_class
    if node:
        spec["nodeName"] = node
    if gates:
        spec["schedulingGates"] = [{"name": g} for g in gates]
    if group:
        # k8s.io/api v0.36.3 core/v1/types.go PodSpec.SchedulingGroup: the PodGroup this pod belongs to.
        spec["schedulingGroup"] = {"podGroupName": group}
    meta: dict[str, Any] = {"name": name, "labels": labels or {}, "annotations": notes}
    if owner:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def write_fixture(name: str, obj: Any) -> Path:
    """Write `obj` as tests/fixtures/real/<name>.json without its managedFields; return the path."""

    def scrub(o: Any) -> Any:
        if isinstance(o, dict):
            return {k: scrub(v) for k, v in o.items() if k != "managedFields"}
        if isinstance(o, list):
            return [scrub(v) for v in o]
        return o

    path = FIXTURES / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(scrub(obj), indent=1, sort_keys=True) + "\n")
    return path


@dataclass
class Scenario:
    """One test's slice of the shared control plane; `cleanup` removes it so the next test starts empty."""

    api: Api
    kubelet: Kubelet
    workdir: Path
    namespaces: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    queues: list[str] = field(default_factory=list)  # Volcano Queues are cluster-scoped
    device_classes: list[str] = field(default_factory=list)  # so are DRA DeviceClasses

    # ---- building ---------------------------------------------------------------------------------

    def namespace(self, name: str, *, team: str | None = None) -> str:
        labels = {"team": team} if team else {}
        self.api.create("/api/v1/namespaces", {"metadata": {"name": name, "labels": labels}})
        self.namespaces.append(name)
        # The ServiceAccount admission plugin refuses pods until the controller made `default`.
        wait_for(
            f"ServiceAccount default in {name}",
            lambda: self.api.get(f"/api/v1/namespaces/{name}/serviceaccounts/default"),
        )
        return name

    def node(self, name: str, *, gpus: int, dra_gpus: int = 0) -> str:
        """Register a fake node: `gpus` through the device plugin's nvidia.com/gpu, `dra_gpus` in a
        ResourceSlice of NVIDIA's DRA driver."""
        self.kubelet.register(name, gpus=gpus, dra_gpus=dra_gpus)
        self.nodes.append(name)
        return name

    def device_class(self, body: dict[str, Any]) -> dict[str, Any]:
        dc: dict[str, Any] = self.api.create(f"{DRA_ROOT}/deviceclasses", body)
        self.device_classes.append(dc["metadata"]["name"])
        return dc

    def paddlejob(
        self,
        ns: str,
        name: str,
        *,
        workers: int,
        gpus: int,
        priority_class: str,
        scheduling_policy: dict[str, Any] | None = None,
        **kw: Any,
    ) -> dict[str, Any]:
        """Return the PaddleJob as the server stored it: `workers` workers of `gpus` GPUs, no pods yet.

        The template is what the scenario's other pods are made of (`pod_manifest`); `kw` goes to it.
        """
        template = pod_manifest(name, gpus=gpus, priority_class=priority_class, **kw)
        body = paddlejob_object(
            name,
            workers=workers,
            gpus=gpus,
            priority_class=priority_class,
            image=template["spec"]["containers"][0]["image"],
            scheduling_policy=scheduling_policy,
        )
        worker = body["spec"]["worker"]["template"]
        worker["metadata"]["annotations"] = template["metadata"]["annotations"]
        worker["spec"] = {**template["spec"], **worker["spec"], "containers": template["spec"]["containers"]}
        job: dict[str, Any] = self.api.create(
            f"/apis/batch.paddlepaddle.org/v1/namespaces/{ns}/paddlejobs", body
        )
        return job

    def paddle_pods(self, ns: str, job: dict[str, Any], count: int | None = None) -> list[dict[str, Any]]:
        """Create the first `count` (default: all) worker pods of `job`, as paddle-operator does."""
        n = job["spec"]["worker"]["replicas"] if count is None else count
        return [self.pod(ns, paddle_pod(job, "worker", i)) for i in range(n)]

    def gang(
        self, ns: str, job: str, *, workers: int, gpus: int, priority_class: str, **kw: Any
    ) -> list[dict[str, Any]]:
        """Create a PaddleJob and its worker pods at once, as the Paddle operator does."""
        pj = self.paddlejob(ns, job, workers=workers, gpus=gpus, priority_class=priority_class, **kw)
        return self.paddle_pods(ns, pj)

    def k8s_gang(
        self, ns: str, name: str, *, min_count: int, priority_class: str | None = None
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """Create an upstream Workload with one gang template and its PodGroup `name`; return both."""
        root = f"/apis/{K8S_SCHEDULING_API}/namespaces/{ns}"
        workload = self.api.create(
            f"{root}/workloads", k8s_workload(name, template="workers", min_count=min_count)
        )
        group = self.api.create(
            f"{root}/podgroups",
            k8s_podgroup(
                name, min_count=min_count, workload=(name, "workers"), priority_class=priority_class
            ),
        )
        return workload, group

    def k8s_podgroup(self, ns: str, name: str) -> dict[str, Any]:
        pg: dict[str, Any] = self.api.get(f"/apis/{K8S_SCHEDULING_API}/namespaces/{ns}/podgroups/{name}")
        return pg

    def volcano_queue(self, body: dict[str, Any], status: dict[str, Any]) -> dict[str, Any]:
        """Create a Volcano Queue and write its status (a subresource) as Volcano's controller would."""
        path = f"/apis/{VOLCANO_API}/queues"
        q = self.api.create(path, body)
        self.queues.append(q["metadata"]["name"])
        q["status"] = status
        out: dict[str, Any] = self.api.request("PUT", f"{path}/{q['metadata']['name']}/status", body=q)
        return out

    def volcano_podgroup(self, ns: str, body: dict[str, Any]) -> dict[str, Any]:
        # Volcano's PodGroup CRD has no status subresource: the status is written with the object.
        pg: dict[str, Any] = self.api.create(f"/apis/{VOLCANO_API}/namespaces/{ns}/podgroups", body)
        return pg

    def pod(self, ns: str, manifest: dict[str, Any]) -> dict[str, Any]:
        return self.api.create(f"/api/v1/namespaces/{ns}/pods", manifest)

    # ---- reading ----------------------------------------------------------------------------------

    def get_pod(self, ns: str, name: str) -> dict[str, Any]:
        return self.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")

    def pods(self, ns: str) -> list[dict[str, Any]]:
        return self.api.items(f"/api/v1/namespaces/{ns}/pods")

    def events(self, ns: str, reason: str | None = None) -> list[dict[str, Any]]:
        evs = self.api.items(f"/api/v1/namespaces/{ns}/events")
        return [e for e in evs if reason is None or e.get("reason") == reason]

    def wait_running(self, ns: str, names: list[str], timeout: float = 60.0) -> None:
        def all_running() -> bool:
            phases = {p["metadata"]["name"]: (p.get("status") or {}).get("phase") for p in self.pods(ns)}
            return all(phases.get(n) == "Running" for n in names)

        wait_for(f"{names} Running in {ns}", all_running, timeout=timeout)

    def wait_unschedulable(
        self, ns: str, name: str, contains: str = "", timeout: float = 60.0
    ) -> dict[str, Any]:
        """Return the pod once the scheduler wrote PodScheduled=False Unschedulable (with `contains`)."""

        def probe() -> dict[str, Any] | None:
            p = self.get_pod(ns, name)
            for c in (p.get("status") or {}).get("conditions") or []:
                if (
                    c["type"] == "PodScheduled"
                    and c["status"] == "False"
                    and c.get("reason") == "Unschedulable"
                    and contains in (c.get("message") or "")
                ):
                    return p
            return None

        return wait_for(f"{ns}/{name} Unschedulable with {contains!r}", probe, timeout=timeout)

    def dump(self, label: str) -> Path:
        path = self.workdir / f"{label}.json"
        path.write_text(json.dumps(self.api.dump(self.namespaces, queues=self.queues), indent=1))
        return path

    def analyze(self, label: str, *, at: float | None = None) -> dict[str, Any]:
        """Return `watchtower analyze --format json` on a fresh dump, run as the real command line."""
        path = self.dump(label)
        at = time.time() if at is None else at
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "watchtower.cli",
                "analyze",
                "--objects",
                str(path),
                "--format",
                "json",
                "--at",
                rfc3339(at),
            ],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
        )
        assert r.returncode == 0, f"watchtower analyze failed ({r.returncode}):\n{r.stderr[-3000:]}"
        doc = json.loads(r.stdout)
        assert doc["skipped"] == [], f"real objects were skipped by the decoder: {doc['skipped']}"
        return doc

    @staticmethod
    def save_fixture(name: str, obj: Any) -> None:
        """Keep a real object for the fast tests (tests/fixtures/real/) when WATCHTOWER_SAVE_FIXTURES=1.

        Opt-in: every run makes new uids and times, and the fixtures read together must come from one run.
        """
        if os.environ.get("WATCHTOWER_SAVE_FIXTURES") == "1":
            write_fixture(name, obj)

    # ---- tearing down -----------------------------------------------------------------------------

    def cleanup(self) -> None:
        for ns in self.namespaces:
            self.api.delete(f"/api/v1/namespaces/{ns}")
        # A terminating namespace admits no new pods; what is left goes at once, then the nodes.
        for ns in self.namespaces:
            for p in self.pods(ns):
                self.api.delete(f"/api/v1/namespaces/{ns}/pods/{p['metadata']['name']}", grace=0)
        for name in self.nodes:
            with contextlib.suppress(ApiError):
                self.kubelet.unregister(name)
            self.kubelet.nodes.discard(name)
        for name in self.queues:
            self.api.delete(f"/apis/{VOLCANO_API}/queues/{name}")
        for name in self.device_classes:
            self.api.delete(f"{DRA_ROOT}/deviceclasses/{name}")
