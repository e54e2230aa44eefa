"""The replay engine on small clusters whose outcome can be worked out by hand."""

from __future__ import annotations

import random
from typing import Any

import pytest

from watchtower.replay.engine import JobOutcome, replay
from watchtower.replay.policy import policy_from_mapping
from watchtower.replay.synthetic import poisson_jobs
from watchtower.replay.trace import TraceJob

PRIORITY = {"critical": 1_000_000, "high": 900_000, "medium": 500_000, "low": 0}


def job(
    id: str,
    at: float,
    run: float,
    *,
    gpus: int = 1,
    pods: int = 1,
    tier: str = "low",
    team: str = "t",
    priority: int | None = None,
    preemptible: bool = True,
) -> TraceJob:
    return TraceJob(
        id=id,
        team=team,
        tier=tier,
        priority=PRIORITY[tier] if priority is None else priority,
        submitted=at,
        duration=run,
        pods=pods,
        gpus_per_pod=gpus,
        preemptible=preemptible,
    )


def run(jobs: list[TraceJob], **policy: Any) -> dict[str, JobOutcome]:
    policy.setdefault("nodes", {"count": 1, "gpus": 8})
    return {o.id: o for o in replay(jobs, policy_from_mapping(policy)).jobs}


def test_a_job_that_fits_starts_when_it_arrives_and_runs_its_duration() -> None:
    out = run([job("a", 10, 100, gpus=8)])
    assert (out["a"].started, out["a"].finished, out["a"].waited) == (10, 110, 0)
    assert out["a"].gpu_hours == pytest.approx(800 / 3600)


def test_a_gang_starts_whole_or_not_at_all() -> None:
    nodes = {"count": 2, "gpus": 4}
    out = run([job("one", 0, 100, gpus=1), job("gang", 1, 50, gpus=4, pods=2)], nodes=nodes)
    # 7 GPUs are free, but two pods of 4 need both nodes whole: the gang waits for "one" to end.
    assert out["gang"].started == 100 and out["gang"].waited == 99
    spread = run([job("gang", 0, 50, gpus=2, pods=4)], nodes=nodes)
    assert spread["gang"].started == 0


def test_a_pod_larger_than_every_node_is_refused_with_the_reason() -> None:
    out = run([job("big", 0, 10, gpus=8), job("ok", 0, 10, gpus=4)], nodes={"count": 2, "gpus": 4})
    assert out["big"].refused == "a pod asks 8 GPUs; no node has that much (the largest has 4 GPUs)"
    assert out["big"].started is None and out["ok"].started == 0


def test_a_gang_larger_than_the_cluster_is_refused_with_the_reason() -> None:
    out = run([job("big", 0, 10, gpus=4, pods=3)], nodes={"count": 2, "gpus": 4})
    assert out["big"].refused == "its 3 pods of 4 GPUs do not fit on the whole cluster (8 GPUs)"


def test_cpu_and_memory_are_fitted_where_job_and_node_both_say() -> None:
    hungry = TraceJob("m", "t", "low", 0, 0.0, 10.0, 2, 1, memory_bytes_per_pod=48 * 2**30)
    out = run(
        [hungry],
        nodes=[{"name": "a", "gpus": 4, "memory_gib": 64}, {"name": "b", "gpus": 4, "memory_gib": 64}],
    )
    assert out["m"].started == 0  # one pod on each node: two do not fit on one node's memory
    refused = run([hungry], nodes=[{"name": "a", "gpus": 4, "memory_gib": 32}])
    assert refused["m"].refused is not None and "no node has that much" in refused["m"].refused


def test_a_team_over_its_quota_waits_while_others_run() -> None:
    jobs = [
        job("a1", 0, 100, gpus=4, team="a"),
        job("a2", 1, 100, gpus=4, team="a"),
        job("b1", 2, 100, gpus=4, team="b"),
    ]
    out = run(jobs, quotas={"a": 4})
    assert out["a1"].started == 0 and out["b1"].started == 2
    assert out["a2"].started == 100  # the node had room at 1, the quota did not


def test_a_job_over_its_teams_whole_quota_is_refused() -> None:
    out = run([job("a", 0, 10, gpus=8, team="a")], quotas={"a": 4})
    assert out["a"].refused == "it asks 8 GPUs; team a's quota is 4"


def test_a_cluster_queue_borrows_only_within_its_limit() -> None:
    jobs = [job("a1", 0, 100, gpus=4, team="a"), job("a2", 1, 100, gpus=4, team="a")]
    queues = [
        {"name": "qa", "teams": ["a"], "nominal_gpus": 4, "borrowing_limit": 0},
        {"name": "qb", "teams": ["b"], "nominal_gpus": 4},
    ]
    assert run(jobs, cluster_queues=queues)["a2"].started == 100
    queues[0]["borrowing_limit"] = 4
    assert run(jobs, cluster_queues=queues)["a2"].started == 1  # qb's unused nominal quota is lent


def test_a_higher_priority_preempts_and_starts_when_the_grace_ends() -> None:
    out = run(
        [job("low", 0, 1000, gpus=8), job("high", 100, 50, gpus=8, tier="high")], termination_grace="30s"
    )
    assert out["high"].started == 130 and out["high"].waited == 30
    low = out["low"]
    assert low.preemptions == 1
    # restart without checkpoints: its 100 s are lost and it runs its whole 1000 s again after "high".
    assert low.gpu_hours_lost == pytest.approx(8 * 100 / 3600)
    assert low.finished == 180 + 1000 and low.waited == 50
    assert low.gpu_hours == pytest.approx(8 * (130 + 1000) / 3600)  # the grace is held by the victim


def test_a_checkpoint_keeps_the_work_up_to_it_and_resume_keeps_all() -> None:
    jobs = [job("low", 0, 1000, gpus=8), job("high", 100, 50, gpus=8, tier="high")]
    ck = run(jobs, termination_grace=0, restart={"checkpoint_every": "1m"})["low"]
    assert ck.gpu_hours_lost == pytest.approx(8 * 40 / 3600) and ck.finished == 150 + 940
    resumed = run(jobs, termination_grace=0, restart={"mode": "resume"})["low"]
    assert resumed.gpu_hours_lost == 0 and resumed.finished == 150 + 900


def test_preemption_follows_each_tiers_rule() -> None:
    jobs = [job("med", 0, 1000, gpus=8, tier="medium"), job("crit", 10, 50, gpus=8, tier="critical")]
    assert run(jobs, termination_grace=0)["crit"].started == 10
    assert run(jobs, termination_grace=0, preemption={"critical": "never"})["crit"].started == 1000
    assert run(jobs, termination_grace=0, preemption={"critical": ["low"]})["crit"].started == 1000


def test_an_equal_priority_never_preempts_and_a_non_preemptible_job_is_never_a_victim() -> None:
    same = run(
        [job("a", 0, 100, gpus=8, tier="high"), job("b", 1, 10, gpus=8, tier="high")], termination_grace=0
    )
    assert same["b"].started == 100
    kept = run(
        [job("a", 0, 100, gpus=8, preemptible=False), job("b", 1, 10, gpus=8, tier="high")],
        termination_grace=0,
    )
    assert kept["b"].started == 100 and kept["a"].preemptions == 0


def test_the_victims_are_the_lowest_priority_newest_and_only_those_needed() -> None:
    nodes = {"count": 2, "gpus": 4}
    jobs = [
        job("c", 0, 1000, gpus=4, priority=5),  # node 0
        job("b", 1, 1000, gpus=3, priority=10),  # node 1
        job("a", 2, 1000, gpus=1, priority=0),  # node 1: the lowest, tried first, not enough alone
        job("high", 3, 10, gpus=4, tier="high"),
    ]
    out = run(jobs, nodes=nodes, termination_grace=0)
    assert [k for k in "abc" if out[k].preemptions] == ["c"]  # "a" was tried and spared
    newest = run(
        [job("old", 0, 1000, gpus=4), job("new", 5, 1000, gpus=4), job("high", 10, 10, gpus=4, tier="high")],
        termination_grace=0,
    )
    assert (newest["old"].preemptions, newest["new"].preemptions) == (0, 1)


def test_pending_jobs_start_in_priority_order_then_arrival() -> None:
    jobs = [
        job("running", 0, 100, gpus=8),
        job("low", 1, 10, gpus=8),
        job("med2", 3, 10, gpus=8, tier="medium"),
        job("med1", 2, 10, gpus=8, tier="medium"),
    ]
    out = run(jobs, preemption={"medium": "never"})
    assert [out[k].started for k in ("med1", "med2", "low")] == [100, 110, 120]


def _mixed_week(seed: int) -> list[TraceJob]:
    rng = random.Random(seed)
    out, t = [], 0.0
    for k in range(2000):
        t += rng.expovariate(1 / 60)
        tier = rng.choice(list(PRIORITY))
        pods = rng.choice([1, 1, 1, 2, 4])
        out.append(
            job(
                f"j{k}",
                t,
                rng.expovariate(1 / 3600),
                gpus=rng.choice([1, 2, 4, 8]),
                pods=pods,
                tier=tier,
                team=f"team{k % 5}",
            )
        )
    return out


def test_the_same_trace_and_policy_give_the_same_replay() -> None:
    policy = policy_from_mapping({"nodes": {"count": 8, "gpus": 8}, "quotas": {"team0": 32}})
    first, second = replay(_mixed_week(3), policy), replay(_mixed_week(3), policy)
    assert first == second
    assert sum(o.preemptions for o in first.jobs) > 0  # the trace is busy enough to exercise preemption
    assert replay(_mixed_week(4), policy) != first


def test_a_synthetic_trace_is_the_same_for_a_seed() -> None:
    a = poisson_jobs(5, 100, per_hour=10, mean_duration=600)
    assert a == poisson_jobs(5, 100, per_hour=10, mean_duration=600)
    assert a != poisson_jobs(6, 100, per_hour=10, mean_duration=600)


def test_passing_over_jobs_shown_unable_to_start_changes_nothing() -> None:
    policy = policy_from_mapping(
        {
            "nodes": {"count": 8, "gpus": 8},
            "quotas": {"team0": 32},
            "preemption": {"high": "never", "medium": ["low"]},
            "cluster_queues": [
                {"name": "q", "teams": ["team1", "team2"], "nominal_gpus": 24, "borrowing_limit": 8}
            ],
        }
    )
    jobs = _mixed_week(5)
    assert replay(jobs, policy) == replay(jobs, policy, prune=False)
