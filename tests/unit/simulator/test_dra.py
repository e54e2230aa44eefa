"""GPUs through DRA in the simulator: DRA-only nodes publishing ResourceSlices, a Job whose pods ask GPUs
through claims from a ResourceClaimTemplate, waiting in the DynamicResources plugin's words, then allocated.
Read through the real decoder, ingestor, state and evaluator, as the service reads the simulator."""

from __future__ import annotations

import json

import pytest

from tests.fixtures import FIXTURES
from tests.unit.simulator.helpers import Watched, pods, small
from watchtower.commands.demo.story import DRA_AT, DRA_FREED, DRA_HOLDER, DRA_JOB
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig
from watchtower.domain.queue import WorkloadState

REAL = FIXTURES / "real" / "dra" / "gpus-all-taken.json"


def _real_message() -> str:
    items = json.loads(REAL.read_text())["items"]
    pod = next(i for i in items if i["kind"] == "Pod" and i["metadata"]["name"] == "waiting")
    return next(c["message"] for c in pod["status"]["conditions"] if c["type"] == "PodScheduled")


def test_dra_nodes_offer_their_gpus_only_in_resource_slices() -> None:
    sim = small(nodes=1, dra_nodes=2)
    dra_nodes = [n for n in sim.nodes.values() if n["metadata"]["name"].startswith("dra-")]
    assert len(dra_nodes) == 2
    assert all("nvidia.com/gpu" not in n["status"]["allocatable"] for n in dra_nodes)
    w = Watched(sim)
    cap = w.snapshot().capacity
    by = {n.name: n.allocatable for n in cap.nodes}
    assert by == {"gpu-node-000": 8, "dra-node-00": 8, "dra-node-01": 8}


@pytest.mark.parametrize("seed", [7, 42])
def test_the_dra_job_waits_in_the_plugins_words_then_its_claims_are_allocated_and_it_runs(seed: int) -> None:
    sim = demo_cluster(SimulatorConfig(seed=seed, dra_nodes=2))  # as the demo runs it
    w = Watched(sim)
    w.step(DRA_AT + 120)
    snap = w.snapshot()
    [job] = [s for s in snap.workloads if s.key.name == DRA_JOB]
    assert job.state is WorkloadState.PENDING
    assert job.gpus_requested == 2 * sim.config.gpus_per_node
    assert job.facts.gpu_claims and not any(c.allocated for c in job.facts.gpu_claims)
    assert {r.reason for r in job.diagnosis.reasons} >= {"cannot allocate all claims"}
    assert "DRA" in job.why
    # The plugin's own words, as the real scheduler wrote them (only the node counts differ).
    message = pods(sim, DRA_JOB)[0].sched_cond["message"]
    real = _real_message()
    assert message.split(": ", 1)[0].startswith("0/") and real.startswith("0/2 nodes are available: 2 ")
    for words in ("cannot allocate all claims.", " still not schedulable, preemption: 0/"):
        assert words in message and words in real
    assert message.endswith("Preemption is not helpful for scheduling.")

    w.step(DRA_FREED - DRA_AT + 600)
    snap = w.evaluator.evaluate(w.state, now=sim.now(), include_running=True)
    [job] = [s for s in snap.workloads if s.key.name == DRA_JOB]
    assert job.state is WorkloadState.RUNNING
    assert all(c.allocated and len(c.devices) == sim.config.gpus_per_node for c in job.facts.gpu_claims)
    assert job.gpus_held == 2 * sim.config.gpus_per_node
    # The holder's claims went with its pods: the controller deletes what it made for a finished pod.
    claims = [o for k, t, o in w.changes if k == "ResourceClaim" and t == "DELETED"]
    assert {c["metadata"]["ownerReferences"][0]["name"] for c in claims} >= {
        p.name for p in pods(sim, DRA_HOLDER)
    }


def test_a_pod_is_not_tried_before_its_claim_is_made() -> None:
    """PreEnqueue: no condition and no event while the claim a template entry names does not exist."""
    sim = small(nodes=1, dra_nodes=1)
    from watchtower.simulator.workloads import dra_job

    sim.submit(dra_job(name="d", team="a", priority_class="batch", gpus=2, replicas=1, duration=600))
    w = Watched(sim)
    w.step(10)
    [p] = pods(sim, "d-")
    assert p.claim is not None and p.node == "dra-node-00"
    kinds = [(k, t) for k, t, _ in w.changes]
    # The claim is made (and the pod names it) before the scheduler writes the allocation and binds.
    assert kinds.index(("ResourceClaim", "ADDED")) < kinds.index(("ResourceClaim", "MODIFIED"))
    assert not w.events("FailedScheduling")
