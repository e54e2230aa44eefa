"""Kueue v0.17.0's own objects, captured from its real controller against kube v1.36.3 by the e2e helper
(tests/fixtures/real/kueue/, see the fixtures README): the decoder and the domain read them as Kueue wrote them."""

from __future__ import annotations

import json
from typing import Any

from tests.fixtures import FIXTURES
from tests.unit.domain.helpers import DECODER, TIERS, apply, evaluate, raw
from watchtower.domain.queue import WorkloadState
from watchtower.domain.state import ClusterState, PreemptionSeen
from watchtower.domain.workloads import WorkloadKey

REAL = FIXTURES / "real" / "kueue"
NS = "e2e-kueue-real"
TRAIN = WorkloadKey(NS, "Job", "train")


def load(name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((REAL / f"{name}.json").read_text())["items"]
    return items


def picture(*names: str) -> tuple[ClusterState, list[Any]]:
    st, happened = ClusterState(), []
    for name in names:
        for obj in load(name):
            happened += apply(st, obj)
    return st, happened


def created(name: str, workload: str) -> float:
    obj = next(i for i in load(name) if i["kind"] == "Workload" and i["metadata"]["name"] == workload)
    w = DECODER.decode("KueueWorkload", raw(obj))
    assert w.created is not None
    return w.created


def test_the_real_pending_job_waits_in_kueue_with_no_pods_and_kueues_words() -> None:
    st, _ = picture("pending")
    now = created("pending", "job-train-b4bf7") + 30 * 60
    waiting = {w.key: w for w in evaluate(st, now).workloads}
    w = waiting[TRAIN]
    assert (w.state, w.source, w.scheduling_reason) == (WorkloadState.PENDING, "kueue", "Pending")
    assert (w.gpus_requested, w.gpus_per_pod, w.pods_pending, w.priority) == (4, 2, 0, 100_000)
    assert "insufficient unused quota for nvidia.com/gpu in flavor e2e-gpu-real, 4 more needed" in w.why
    assert w.kueue is not None and (w.kueue.local_queue, w.kueue.cluster_queue) == (
        "team-queue",
        "e2e-cq-real",
    )
    assert w.admission_wait == w.wait_seconds
    # The blocker is admitted and its pods run: it does not wait.
    assert WorkloadKey(NS, "Job", "blocker") not in waiting
    q = st.kueue.cluster_queues["e2e-cq-real"]
    assert (q.nominal_gpus, q.reserved_gpus, q.free_nominal) == (4, 4, 0)


def test_the_real_preemption_names_the_urgent_workload_and_its_tier() -> None:
    st, happened = picture("pending", "admitted", "preempted")
    # The dump lists the victim before its preemptor: recorded first, attributed when the preemptor comes.
    assert [h.new for h in happened if isinstance(h, PreemptionSeen)] == [True, False]
    (seen,) = st.ledger.preemptions.values()
    assert (seen.victim_name, seen.victim_workload) == ("job-train-b4bf7", TRAIN)
    assert (seen.preemptor_kind, seen.preemptor_name, seen.kueue_reason) == (
        "KueueWorkload",
        "job-urgent-d2b8a",
        "InClusterQueue",
    )
    assert seen.preemptor_tier(TIERS) == "critical" and seen.victim_tier(TIERS) == "low"
    # Its run is read from its pods (Kueue writes PodsReady only with waitForPodsReady): the e2e test
    # preempted it within seconds of starting, so little was lost, but not nothing unknown.
    pods = [
        DECODER.decode("Pod", raw(i))
        for i in load("preempted")
        if i["kind"] == "Pod" and i["metadata"]["name"].startswith("train-")
    ]
    assert seen.victim_started == min(p.start_time for p in pods if p.start_time is not None)
    assert seen.victim_gpus == 4 and seen.gpu_hours_lost is not None


def test_the_real_requeued_job_waits_again_from_its_eviction() -> None:
    # Read as a fresh LIST after the requeue: the evicted run's pods are gone.
    st, _ = picture("requeued")
    now = created("requeued", "job-urgent-d2b8a") + 600
    (w,) = [x for x in evaluate(st, now).workloads if x.key == TRAIN]
    assert (w.state, w.source) == (WorkloadState.PENDING, "kueue")
    assert w.kueue is not None and w.kueue.evictions == 1
    # Its wait starts at the requeue (QuotaReserved False again), not at its creation an hour of running ago.
    assert w.since is not None and w.since > created("requeued", "job-train-b4bf7")
    assert len([p for p in st.ledger.preemptions.values() if p.preemptor_kind == "KueueWorkload"]) == 1


def test_the_real_visibility_answer_gives_positions() -> None:
    bodies = json.loads((REAL / "visibility-pending.json").read_text())["items"]
    for b in bodies:
        assert DECODER.pending_positions(raw(b)) == {(NS, "job-train-b4bf7"): 0}
