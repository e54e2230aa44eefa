"""Kueue in the simulator, read back as the service reads it: a Job queued by Kueue waits suspended with no
pods at its ClusterQueue's quota, is admitted later, and one Workload is preempted by a higher-priority one.

The stand-in's shapes and words are Kueue's (watchtower/simulator/forms/kueue/)."""

from __future__ import annotations

import pytest

from tests.unit.simulator.helpers import Watched
from watchtower.commands.demo.story import KUEUE_JOBS, KUEUE_URGENT
from watchtower.commands.demo.warm import demo_cluster
from watchtower.config.model import SimulatorConfig

HELD, LOW_A, URGENT = KUEUE_JOBS[1][0], KUEUE_JOBS[0][0], KUEUE_URGENT[0]


@pytest.mark.parametrize("seed", [7, 42])
def test_a_kueue_job_waits_with_no_pods_at_its_quota_is_admitted_later_and_one_is_preempted(
    seed: int,
) -> None:
    w = Watched(demo_cluster(SimulatorConfig(seed=seed)))
    held: set[tuple[str, str, str]] = set()
    admitted_with_pods = False
    for _minute in range(60):
        w.step(60)
        snap = w.snapshot()
        for s in snap.waiting():
            if s.key.name == HELD and s.source == "kueue":
                held.add((s.kind, s.state.value, s.scheduling_reason))
                assert s.pods_pending == 0 and s.gpus_requested > 0
                assert "held by Kueue in ClusterQueue research-cq" in s.why
        if any(p.name.startswith(HELD) for p in w.sim.pods.values()):
            admitted_with_pods = True
    assert held == {("Job", "pending", "Pending")}
    assert admitted_with_pods  # admitted once the urgent job was done
    kueue = [p for p in w.state.ledger.preemptions.values() if p.preemptor_kind == "KueueWorkload"]
    assert len(kueue) == 1
    (p,) = kueue
    assert p.victim_workload is not None and p.victim_workload.name == LOW_A
    assert p.kueue_reason == "InClusterQueue" and p.preemptor_name.startswith(f"job-{URGENT}-")
    assert p.gpu_hours_lost is not None and p.gpu_hours_lost > 0
    assert not [d for d in w.state.ledger.disruptions.values() if d.name.startswith(LOW_A)]
