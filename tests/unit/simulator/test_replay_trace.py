"""The simulator's ground truth as a replay trace and the demo's cluster as a replay policy, on a simulated
cluster run for a few hours (real simulator, no mock)."""

from __future__ import annotations

from watchtower.config.model import Settings, SimulatorConfig
from watchtower.replay.engine import replay
from watchtower.simulator.cluster import SimulatedCluster
from watchtower.simulator.replay_trace import demo_policy, trace_of
from watchtower.simulator.workloads import paddle_job, single_pod


def test_each_workload_becomes_a_row_with_its_start_pods_and_tier() -> None:
    cfg = SimulatorConfig(seed=3, nodes=4, gpus_per_node=8, cordoned_nodes=1, arrivals_per_hour=0)
    sim = SimulatedCluster(cfg)
    t0 = sim.now()
    gang = sim.submit(
        paddle_job(name="g", team="nlp", priority_class="batch", workers=2, gpus_per_worker=4, duration=600)
    )
    pod = sim.submit(
        single_pod(kind="Pod", name="p", team="vision", priority_class="urgent-debug", gpus=2, duration=300)
    )
    sim.step(1800)
    policy = demo_policy(cfg, Settings().tiers)
    trace = trace_of([gang, pod], policy.tier_policy())
    rows = {j.id: j for j in trace.jobs}
    g, p = rows["team-nlp/g"], rows["team-vision/p"]
    # Its two GPU workers, not its parameter server; no gang (no PodGroup: kube-scheduler places its pods
    # one by one, as the demo's policy says); the low tier of `batch`.
    assert (g.pods, g.gpus_per_pod, g.gang_min, g.tier, g.priority) == (2, 4, None, "low", 100_000)
    assert policy.gangs == "declared"
    assert (p.pods, p.gpus_per_pod, p.gang_min, p.tier) == (1, 2, None, "critical")
    for row, w in ((g, gang), (p, pod)):
        assert row.submitted == w.created == t0
        assert row.started is not None and row.started >= t0  # bound after its controller made its pods
        # Its run and the image pulls of its first start: the GPUs are held meanwhile.
        assert row.duration > w.spec.duration
    # The policy: the schedulable nodes (a cordoned one left out), the quotas, the low tier never preempting.
    assert sum(n.gpus for n in policy.node_list()) == 24
    assert policy.quotas == dict.fromkeys(cfg.teams, cfg.team_gpu_quota)
    assert policy.may_preempt("low") == "never" and policy.restart.mode == "resume"
    out = {o.id: o for o in replay(trace.jobs, policy).jobs}
    assert out["team-nlp/g"].waited == 0 and out["team-vision/p"].waited == 0  # an empty cluster
