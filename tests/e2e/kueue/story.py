"""One Kueue story against the real manager, in steps, shared by test_kueue.py and capture_kueue.py.

A ClusterQueue of GPUS nominal GPUs (withinClusterQueue: LowerPriority) behind a LocalQueue. `blocker` takes
every GPU; `train` (same priority) waits for quota, suspended, without pods; the blocker goes, `train` is
admitted, the Job controller makes its pods, the real scheduler binds them, the kubelet stand-in runs them;
`urgent` (a WorkloadPriorityClass above) arrives and Kueue preempts `train` to admit it.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any

from tests.e2e.api import Api, wait_for
from tests.e2e.kueue import objects as k

GPUS = 4
# train's pods checkpoint this long once Kueue suspends their Job: the preempted state can be looked at.
CHECKPOINT_SECONDS = 6.0


@dataclass
class Story:
    api: Api
    ns: str
    suffix: str = field(default_factory=lambda: uuid.uuid4().hex[:5])
    jobs: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def flavor(self) -> str:
        return f"e2e-gpu-{self.suffix}"

    @property
    def cluster_queue(self) -> str:
        return f"e2e-cq-{self.suffix}"

    @property
    def priority_class(self) -> str:
        return f"e2e-urgent-{self.suffix}"

    local_queue = "team-queue"

    # ---- steps ------------------------------------------------------------------------------------

    def queues(self) -> None:
        self.api.create(f"{k.ROOT}/resourceflavors", k.resource_flavor(self.flavor))
        self.api.create(
            f"{k.ROOT}/clusterqueues", k.cluster_queue(self.cluster_queue, flavor=self.flavor, gpus=GPUS)
        )
        self.api.create(
            f"{k.ROOT}/namespaces/{self.ns}/localqueues",
            k.local_queue(self.local_queue, cluster_queue=self.cluster_queue),
        )
        self.api.create(
            f"{k.ROOT}/workloadpriorityclasses", k.workload_priority_class(self.priority_class, 1_000_000)
        )
        # Kueue admits nothing through a ClusterQueue it has not marked Active (its flavor seen).
        wait_for(
            f"ClusterQueue {self.cluster_queue} Active",
            lambda: k.is_true(self.api.get(f"{k.ROOT}/clusterqueues/{self.cluster_queue}"), "Active"),
        )
        wait_for(
            f"LocalQueue {self.local_queue} Active",
            lambda: k.is_true(
                self.api.get(f"{k.ROOT}/namespaces/{self.ns}/localqueues/{self.local_queue}"), "Active"
            ),
        )

    def job(self, name: str, **kw: Any) -> dict[str, Any]:
        job: dict[str, Any] = self.api.create(
            f"/apis/batch/v1/namespaces/{self.ns}/jobs", k.queued_job(name, queue=self.local_queue, **kw)
        )
        self.jobs[name] = job
        return job

    def workload(self, name: str) -> dict[str, Any] | None:
        return k.workload_of(self.api, self.ns, self.jobs[name])

    def wait_workload(self, name: str, what: str, probe: Any, timeout: float = 60.0) -> dict[str, Any]:
        w: dict[str, Any] = k.wait_workload(self.api, self.ns, self.jobs[name], what, probe, timeout=timeout)
        return w

    def pods(self, job: str) -> list[dict[str, Any]]:
        return self.api.items(
            f"/api/v1/namespaces/{self.ns}/pods", labelSelector=f"batch.kubernetes.io/job-name={job}"
        )

    def wait_running(self, job: str, count: int, timeout: float = 60.0) -> list[dict[str, Any]]:
        def running() -> list[dict[str, Any]] | None:
            pods = [p for p in self.pods(job) if (p.get("status") or {}).get("phase") == "Running"]
            return pods if len(pods) == count else None

        out: list[dict[str, Any]] = wait_for(f"{count} pods of {job} Running", running, timeout=timeout)
        return out

    def queue_behind_blocker(self) -> dict[str, Any]:
        """Fill the quota with `blocker`; return `train`'s Workload once Kueue reported it waiting for quota."""
        self.job("blocker", pods=2, gpus=2, priority_class="batch")
        self.wait_workload("blocker", "admitted", lambda w: k.is_true(w, "Admitted"))
        self.wait_running("blocker", 2)
        self.job("train", pods=2, gpus=2, priority_class="batch", terminate_seconds=CHECKPOINT_SECONDS)
        return self.wait_workload(
            "train",
            "QuotaReserved=False with a message",
            lambda w: (
                (c := k.condition(w, "QuotaReserved")) is not None and c["status"] == "False" and c["message"]
            ),
        )

    def free_quota(self) -> dict[str, Any]:
        """Delete `blocker`; return `train`'s Workload once admitted and its two pods Running."""
        self.api.delete(f"/apis/batch/v1/namespaces/{self.ns}/jobs/blocker", propagationPolicy="Background")
        w = self.wait_workload("train", "admitted", lambda w: k.is_true(w, "Admitted"))
        self.wait_running("train", 2)
        return w

    def preempt(self) -> dict[str, Any]:
        """Queue `urgent` (4 GPUs, WorkloadPriorityClass 1,000,000); return `train`'s Workload once preempted."""
        self.job(
            "urgent",
            pods=1,
            gpus=GPUS,
            priority_class="urgent-debug",
            workload_priority_class=self.priority_class,
        )
        return self.wait_workload(
            "train", "Preempted and Evicted", lambda w: k.is_true(w, "Preempted") and k.is_true(w, "Evicted")
        )

    def preemptor_runs(self) -> dict[str, Any]:
        """Return `urgent`'s Workload once admitted and its pod Running (train's pods gone)."""
        w = self.wait_workload("urgent", "admitted", lambda w: k.is_true(w, "Admitted"), timeout=90)
        self.wait_running("urgent", 1, timeout=90)
        return w

    # ---- reading ----------------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        """Return a kubectl-style List of every object of the story: Kueue's, the Jobs, pods and events."""
        api, ns = self.api, self.ns
        kinds: list[tuple[str, str, list[dict[str, Any]]]] = [
            ("ResourceFlavor", k.KUEUE_API, [api.get(f"{k.ROOT}/resourceflavors/{self.flavor}")]),
            (
                "WorkloadPriorityClass",
                k.KUEUE_API,
                [api.get(f"{k.ROOT}/workloadpriorityclasses/{self.priority_class}")],
            ),
            ("ClusterQueue", k.KUEUE_API, [api.get(f"{k.ROOT}/clusterqueues/{self.cluster_queue}")]),
            ("LocalQueue", k.KUEUE_API, api.items(f"{k.ROOT}/namespaces/{ns}/localqueues")),
            ("Workload", k.KUEUE_API, api.items(f"{k.ROOT}/namespaces/{ns}/workloads")),
            ("Job", "batch/v1", api.items(f"/apis/batch/v1/namespaces/{ns}/jobs")),
            ("Pod", "v1", api.items(f"/api/v1/namespaces/{ns}/pods")),
            ("Event", "v1", api.items(f"/api/v1/namespaces/{ns}/events")),
        ]
        items = [{**o, "kind": kind, "apiVersion": v} for kind, v, objs in kinds for o in objs]
        return {"kind": "List", "apiVersion": "v1", "items": items}

    def cleanup(self) -> None:
        """Remove the cluster-scoped objects (the namespace takes the rest); Kueue lifts its finalizers."""
        for path in (
            f"{k.ROOT}/clusterqueues/{self.cluster_queue}",
            f"{k.ROOT}/resourceflavors/{self.flavor}",
            f"{k.ROOT}/workloadpriorityclasses/{self.priority_class}",
        ):
            self.api.delete(path)
