"""Capture what Kueue's real controller manager writes, into tests/fixtures/real/kueue/*.json.

    PYTHONPATH=$PWD .venv/bin/python -m tests.e2e.capture_kueue

It starts the e2e control plane, Kueue's CRDs and its manager (tests/e2e/kueue/, the same as the e2e suite),
a fake 4-GPU node and the kubelet stand-in, then runs tests/e2e/kueue/story.py, writing one kubectl-style List
of every object of the story (Kueue's kinds, the Jobs, pods, events) at each step:

- `pending`: `train` waits for quota behind `blocker` (QuotaReserved=False), suspended, no pods;
- `visibility-pending`: the visibility API's pendingworkloads of the ClusterQueue and of the LocalQueue then;
- `admitted`: the blocker gone, `train` admitted, its pods Running;
- `preempted`: `urgent` (WorkloadPriorityClass 1,000,000) made Kueue preempt `train` (Preempted/Evicted),
  `train`'s pods terminating;
- `requeued`: `urgent` admitted and Running, `train` pending again.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from tests.e2e import crds
from tests.e2e.api import Api, wait_for
from tests.e2e.controlplane.cluster import ControlPlane, binaries_dir
from tests.e2e.kubelet import Kubelet
from tests.e2e.kueue.manager import VISIBILITY_API, KueueManager, binary
from tests.e2e.kueue.story import Story
from tests.e2e.scenario import FIXTURES, PRIORITY_CLASSES, write_fixture

NS = "e2e-kueue-real"
OUT = "kueue"


def capture() -> list[Path]:
    (FIXTURES / OUT).mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="watchtower-kueue-"))
    cp = ControlPlane(workdir / "controlplane", binaries_dir())
    cp.workdir.mkdir()
    cp.start()
    api = Api(cp.url, ca=cp.pki.ca_cert, cert=(cp.pki.admin_cert, cp.pki.admin_key))
    kubelet = Kubelet(api)
    manager = KueueManager(workdir / "kueue", binary(), cp)
    written: list[Path] = []

    def keep(name: str, doc: dict[str, Any]) -> None:
        written.append(write_fixture(f"{OUT}/{name}", doc))

    try:
        for name, value, policy in PRIORITY_CLASSES:
            api.create(
                "/apis/scheduling.k8s.io/v1/priorityclasses",
                {"metadata": {"name": name}, "value": value, "preemptionPolicy": policy},
            )
        t0 = time.monotonic()
        crds.install(api, crds.KUEUE_CRDS)
        print(f"Kueue CRDs served after {time.monotonic() - t0:.1f}s", file=sys.stderr)
        manager.start(api)
        print(
            f"kueue ready after {manager.startup_seconds:.1f}s, its visibility API after"
            f" {manager.visibility_seconds:.1f}s; log {manager.log}",
            file=sys.stderr,
        )
        kubelet.start()
        kubelet.register("gpu-kq1", gpus=4)
        api.create("/api/v1/namespaces", {"metadata": {"name": NS, "labels": {"team": "research"}}})
        wait_for(
            "ServiceAccount default", lambda: api.get(f"/api/v1/namespaces/{NS}/serviceaccounts/default")
        )
        story = Story(api, NS, suffix="real")
        story.queues()
        story.queue_behind_blocker()
        time.sleep(2)  # a requeue or two: Kueue's events for them too
        keep("pending", story.snapshot())
        # Kueue's visibility API through the aggregation layer: the pending Workloads and their positions.
        vis = f"/apis/{VISIBILITY_API}/v1beta2"
        keep(
            "visibility-pending",
            {
                "kind": "List",
                "apiVersion": "v1",
                "items": [
                    api.get(f"{vis}/clusterqueues/{story.cluster_queue}/pendingworkloads"),
                    api.get(f"{vis}/namespaces/{NS}/localqueues/{story.local_queue}/pendingworkloads"),
                ],
            },
        )
        story.free_quota()
        keep("admitted", story.snapshot())
        story.preempt()
        keep("preempted", story.snapshot())
        story.preemptor_runs()
        story.wait_workload(
            "train",
            "pending again",
            lambda w: (
                (c := w.get("status", {}).get("conditions"))
                and any(x["type"] == "QuotaReserved" and x["status"] == "False" for x in c)
            ),
        )
        keep("requeued", story.snapshot())
        return written
    finally:
        manager.stop()
        kubelet.stop()
        api.close()
        cp.stop()
        if manager.peak_rss_mib is not None:
            print(f"kueue peak RSS {manager.peak_rss_mib:.0f} MiB", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args(argv)
    for path in capture():
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
