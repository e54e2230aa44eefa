"""Capture what Volcano's own scheduler writes, into tests/fixtures/real/volcano-real-*.json.

Not part of the test suite or CI: it needs a vc-scheduler binary, which is built from a checkout of
volcano-sh/volcano (its module is not served by the Go module proxy used here):

    cd <volcano checkout> && GOTOOLCHAIN=local CGO_ENABLED=0 GOFLAGS=-mod=mod \\
        go build -trimpath -ldflags=-s -o /tmp/vc-scheduler ./cmd/scheduler
    PYTHONPATH=$PWD .venv/bin/python -m tests.e2e.capture_volcano --scheduler /tmp/vc-scheduler

It starts the e2e control plane (the same binaries as the tests), Volcano's CRDs, two Open Queues and two fake
4-GPU nodes, then vc-scheduler with the scheduler configuration of Volcano's Helm chart
(tests/e2e/volcano-scheduler.conf). Two gangs, each a Volcano PodGroup and pods with `schedulerName: volcano`
and the `scheduling.k8s.io/group-name` annotation: `rank` (4 × 2 GPUs, minResources 8 GPUs) in queue `team`
capped at 4 GPUs stays Pending; `small` (2 × 2 GPUs) in `default` runs.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e import crds
from tests.e2e.api import Api, wait_for
from tests.e2e.controlplane.cluster import ControlPlane, binaries_dir, free_port
from tests.e2e.kubelet import Kubelet
from tests.e2e.scenario import PRIORITY_CLASSES, pod_manifest, write_fixture
from tests.e2e.workloads import VOLCANO_API, VOLCANO_GROUP_ANNOTATION, volcano_queue

CONF = Path(__file__).resolve().parent / "volcano-scheduler.conf"
NS = "e2e-volcano-real"


def _open_queue(api: Api, body: dict[str, Any]) -> None:
    api.create(f"/apis/{VOLCANO_API}/queues", body)
    name = body["metadata"]["name"]
    # Volcano's controller-manager opens queues; vc-scheduler allocates nothing to one whose state is unset.
    q = api.get(f"/apis/{VOLCANO_API}/queues/{name}")
    q["status"] = {"state": "Open"}
    api.request("PUT", f"/apis/{VOLCANO_API}/queues/{name}/status", body=q)


def _gang(api: Api, name: str, *, size: int, gpus: int, queue: str, priority_class: str) -> None:
    total = size * gpus
    api.create(
        f"/apis/{VOLCANO_API}/namespaces/{NS}/podgroups",
        {
            "apiVersion": VOLCANO_API,
            "kind": "PodGroup",
            "metadata": {"name": name},
            # As Volcano's job controller and paddle-operator (getPGMinResource) fill them in.
            "spec": {
                "minMember": size,
                "queue": queue,
                "priorityClassName": priority_class,
                "minResources": {"nvidia.com/gpu": str(total), "cpu": str(size), "memory": f"{size}Gi"},
            },
        },
    )
    for i in range(size):
        m = pod_manifest(f"{name}-{i}", gpus=gpus, priority_class=priority_class)
        m["spec"]["schedulerName"] = "volcano"
        m["metadata"]["annotations"][VOLCANO_GROUP_ANNOTATION] = name
        api.create(f"/api/v1/namespaces/{NS}/pods", m)


def _listed(objs: list[dict[str, Any]], kind: str, api_version: str) -> list[dict[str, Any]]:
    return [{**o, "kind": kind, "apiVersion": api_version} for o in objs]


def capture(scheduler: Path, settle: float) -> list[Path]:
    """Run the scenario and return the fixture files written."""
    cp = ControlPlane(Path(tempfile.mkdtemp(prefix="watchtower-volcano-")), binaries_dir())
    cp.start()
    api = Api(cp.url, ca=cp.pki.ca_cert, cert=(cp.pki.admin_cert, cp.pki.admin_key))
    kubelet = Kubelet(api)
    vc: subprocess.Popen[bytes] | None = None
    try:
        for name, value, policy in PRIORITY_CLASSES:
            api.create(
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy},
            )
        crds.install(api)
        crds.install(api, crds.VOLCANO_SCHEDULER_CRDS)
        _open_queue(
            api,
            {
                "apiVersion": VOLCANO_API,
                "kind": "Queue",
                "metadata": {"name": "default"},
                "spec": {"weight": 1, "reclaimable": True},
            },
        )
        _open_queue(
            api,
            volcano_queue(
                "team",
                weight=1,
                capability={"nvidia.com/gpu": "4", "cpu": "64", "memory": "512Gi"},
                deserved={"nvidia.com/gpu": "4"},
                guarantee={"nvidia.com/gpu": "0"},
            ),
        )
        kubelet.start()
        kubelet.register("gpu-vc1", gpus=4)
        kubelet.register("gpu-vc2", gpus=4)
        log = (cp.workdir / "vc-scheduler.log").open("wb")
        vc = subprocess.Popen(
            [
                str(scheduler),
                f"--kubeconfig={cp.kubeconfig}",
                "--leader-elect=false",
                f"--scheduler-conf={CONF}",
                f"--listen-address=127.0.0.1:{free_port()}",
                f"--healthz-address=127.0.0.1:{free_port()}",
                "--schedule-period=1s",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        api.create("/api/v1/namespaces", {"metadata": {"name": NS, "labels": {"team": "search"}}})
        wait_for(
            "ServiceAccount default", lambda: api.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default")
        )
        _gang(api, "rank", size=4, gpus=2, queue="team", priority_class="experiment")
        _gang(api, "small", size=2, gpus=2, queue="default", priority_class="batch")

        def settled() -> bool:
            groups = {
                g["metadata"]["name"]: g for g in api.items(f"/apis/{VOLCANO_API}/namespaces/{NS}/podgroups")
            }
            rank = (groups["rank"].get("status") or {}).get("conditions") or []
            small = (groups["small"].get("status") or {}).get("phase")
            return bool(rank) and small == "Running"

        wait_for("rank Unschedulable and small Running", settled, timeout=120)
        time.sleep(settle)  # a few more sessions: their events too
        pods = api.items(f"/api/v1/namespaces/{NS}/pods")
        groups = api.items(f"/apis/{VOLCANO_API}/namespaces/{NS}/podgroups")
        queues = api.items(f"/apis/{VOLCANO_API}/queues")
        events = api.items(f"/api/v1/namespaces/{NS}/events")

        def of(gang: str) -> list[dict[str, Any]]:
            return (
                _listed(
                    [
                        q
                        for q in queues
                        if q["metadata"]["name"] in ("team" if gang == "rank" else "default", "root")
                    ],
                    "Queue",
                    VOLCANO_API,
                )
                + _listed([g for g in groups if g["metadata"]["name"] == gang], "PodGroup", VOLCANO_API)
                + _listed([p for p in pods if p["metadata"]["name"].startswith(f"{gang}-")], "Pod", "v1")
                + _listed(
                    [e for e in events if e["involvedObject"]["name"].split("-")[0] == gang], "Event", "v1"
                )
            )

        return [
            write_fixture(
                "volcano-real-podgroup-pending", {"kind": "List", "apiVersion": "v1", "items": of("rank")}
            ),
            write_fixture(
                "volcano-real-podgroup-running", {"kind": "List", "apiVersion": "v1", "items": of("small")}
            ),
        ]
    finally:
        if vc is not None:
            vc.terminate()
            vc.wait(15)
        kubelet.stop()
        api.close()
        cp.stop()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scheduler", type=Path, required=True, help="a vc-scheduler binary")
    ap.add_argument("--settle", type=float, default=5.0, help="seconds to let more sessions run")
    args = ap.parse_args(argv)
    for path in capture(args.scheduler, args.settle):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
