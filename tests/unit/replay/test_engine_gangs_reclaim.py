"""The replay engine's partial gangs (`gang_min`) and Kueue's reclaimWithinCohort, on clusters small enough to
work the outcome out by hand (the figures in the comments)."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import pytest

from watchtower.replay.engine import JobOutcome, replay
from watchtower.replay.policy import PolicyError, policy_from_mapping
from watchtower.replay.trace import TraceJob

PRIORITY = {"critical": 1_000_000, "high": 900_000, "medium": 500_000, "low": 0}


def job(
    id: str,
    at: float,
    run: float,
    *,
    gpus: int = 1,
    pods: int = 1,
    gang_min: int | None = None,
    tier: str = "low",
    team: str = "t",
) -> TraceJob:
    return TraceJob(
        id=id,
        team=team,
        tier=tier,
        priority=PRIORITY[tier],
        submitted=at,
        duration=run,
        pods=pods,
        gpus_per_pod=gpus,
        gang_min=gang_min,
    )


def run(jobs: list[TraceJob], **policy: Any) -> dict[str, JobOutcome]:
    policy.setdefault("nodes", {"count": 1, "gpus": 8})
    return {o.id: o for o in replay(jobs, policy_from_mapping(policy)).jobs}


# --- gang_min --------------------------------------------------------------------------------------------


def test_a_partial_gang_starts_on_its_minimum_and_runs_on_the_pods_that_fit() -> None:
    nodes = {"count": 2, "gpus": 4}
    jobs = [job("one", 0, 100, gpus=1), job("gang", 1, 50, gpus=4, pods=2, gang_min=1)]
    out = run(jobs, nodes=nodes)
    # One whole node is free at 1: one pod of 4 GPUs starts there and runs the gang's 50 s on it alone.
    assert (out["gang"].started, out["gang"].finished, out["gang"].waited) == (1, 51, 0)
    assert out["gang"].gpu_hours == pytest.approx(4 * 50 / 3600)
    whole = run([jobs[0], dataclasses.replace(jobs[1], gang_min=2)], nodes=nodes)
    assert whole["gang"].started == 100  # gang_min = pods: placed whole, as without it


def test_a_partial_gang_takes_every_pod_that_fits_when_it_starts() -> None:
    out = run([job("gang", 0, 60, gpus=2, pods=6, gang_min=2)], nodes={"count": 1, "gpus": 8})
    # Four of its six pods of 2 fit on the 8 GPUs: it runs on 8 GPUs, not on its minimum of 4.
    assert out["gang"].started == 0 and out["gang"].gpu_hours == pytest.approx(8 * 60 / 3600)


def test_a_partial_gang_preempts_only_for_its_minimum() -> None:
    jobs = [
        job("low-1", 0, 1000, gpus=4),
        job("low-2", 10, 1000, gpus=4),
        job("high", 100, 50, gpus=4, pods=2, gang_min=1, tier="high"),
    ]
    out = run(jobs, termination_grace="30s")
    # One pod needs one victim's 4 GPUs: the newest low job goes, the other keeps running.
    assert out["low-2"].preemptions == 1 and out["low-1"].preemptions == 0
    assert (out["high"].started, out["high"].finished) == (130, 180)
    assert out["high"].gpu_hours == pytest.approx(4 * 50 / 3600)
    whole = run([*jobs[:2], dataclasses.replace(jobs[2], gang_min=None)], termination_grace="30s")
    assert whole["low-1"].preemptions == 1 and whole["low-2"].preemptions == 1


def test_a_partial_gang_larger_than_the_cluster_runs_when_its_minimum_fits() -> None:
    out = run([job("big", 0, 10, gpus=4, pods=3, gang_min=2)], nodes={"count": 2, "gpus": 4})
    assert out["big"].refused is None and out["big"].started == 0
    too_big = run([job("big", 0, 10, gpus=4, pods=3, gang_min=3)], nodes={"count": 2, "gpus": 4})
    assert too_big["big"].refused == "its 3 pods of 4 GPUs do not fit on the whole cluster (8 GPUs)"


def test_a_partial_gang_takes_only_what_its_quota_leaves() -> None:
    out = run([job("gang", 0, 60, gpus=2, pods=4, gang_min=1, team="a")], quotas={"a": 4})
    # Its team may hold 4 GPUs: two of its four pods run.
    assert out["gang"].started == 0 and out["gang"].gpu_hours == pytest.approx(4 * 60 / 3600)


# --- reclaimWithinCohort ---------------------------------------------------------------------------------


def queues(reclaim: str | None) -> list[dict[str, Any]]:
    qa: dict[str, Any] = {"name": "qa", "teams": ["a"], "nominal_gpus": 4}
    if reclaim is not None:
        qa["preemption"] = {"reclaimWithinCohort": reclaim}
    return [qa, {"name": "qb", "teams": ["b"], "nominal_gpus": 4}]


def borrowed_week(tier: str = "low", gpus: int = 4) -> list[TraceJob]:
    """qb runs two jobs of 4 on the 8 GPUs (one on qa's lent quota); then a job of qa's arrives at 100."""
    return [
        job("b1", 0, 1000, gpus=4, team="b"),
        job("b2", 1, 1000, gpus=4, team="b"),
        job("a1", 100, 50, gpus=gpus, team="a", tier=tier),
    ]


def test_without_reclaim_a_queue_waits_for_its_lent_quota_to_come_back() -> None:
    for reclaim in (None, "Never"):
        out = run(borrowed_week(tier="high"), cluster_queues=queues(reclaim))
        # Within qa's nominal 4, but the cohort's 8 are in use: a1 waits for b1 to end at 1000, though
        # its priority is higher (Kueue holds it back, kube-scheduler never sees its pods).
        assert out["a1"].started == 1000 and out["b2"].preemptions == 0


def test_reclaim_any_preempts_the_borrowers_newest_job_whatever_its_priority() -> None:
    out = run(borrowed_week(tier="low"), cluster_queues=queues("Any"), termination_grace="30s")
    assert (out["a1"].started, out["a1"].waited) == (130, 30)
    assert out["b2"].preemptions == 1 and out["b1"].preemptions == 0  # qb is back at its nominal 4


def test_reclaim_lower_priority_spares_the_borrowers_jobs_of_equal_priority() -> None:
    same = run(borrowed_week(tier="low"), cluster_queues=queues("LowerPriority"))
    assert same["a1"].started == 1000 and same["b2"].preemptions == 0
    higher = run(borrowed_week(tier="high"), cluster_queues=queues("LowerPriority"), termination_grace="30s")
    assert higher["a1"].started == 130 and higher["b2"].preemptions == 1


def test_reclaim_never_takes_more_than_the_queues_own_nominal_quota() -> None:
    # a1 asks 8: beyond qa's nominal 4, it would borrow, and borrowing is not reclaiming.
    out = run(borrowed_week(gpus=8), cluster_queues=queues("Any"))
    assert out["b1"].preemptions == 0 and out["b2"].preemptions == 0
    assert out["a1"].started == 1001  # both of qb's jobs have ended


def test_a_policy_names_reclaim_as_kueue_does_and_refuses_other_values() -> None:
    p = policy_from_mapping({"cluster_queues": queues("LowerPriority")})
    assert p.cluster_queues[0].preemption.reclaim_within_cohort == "LowerPriority"
    with pytest.raises(PolicyError) as e:
        policy_from_mapping({"cluster_queues": queues("Sometimes")})
    assert "cluster_queues[0].preemption.reclaimWithinCohort" in str(e.value)


def test_passing_over_jobs_changes_nothing_with_partial_gangs_and_reclaim() -> None:
    rng = random.Random(7)
    jobs, t = [], 0.0
    for k in range(2000):
        t += rng.expovariate(1 / 60)
        pods = rng.choice([1, 1, 1, 2, 4])
        jobs.append(
            job(
                f"j{k}",
                t,
                rng.expovariate(1 / 3600),
                gpus=rng.choice([1, 2, 4, 8]),
                pods=pods,
                gang_min=1 if pods > 1 and k % 2 else None,
                tier=rng.choice(list(PRIORITY)),
                team=f"team{k % 5}",
            )
        )
    policy = policy_from_mapping(
        {
            "nodes": {"count": 8, "gpus": 8},
            "cluster_queues": [
                {
                    "name": "q1",
                    "teams": ["team0", "team1"],
                    "nominal_gpus": 32,
                    "preemption": {"reclaimWithinCohort": "Any"},
                },
                {
                    "name": "q2",
                    "teams": ["team2", "team3"],
                    "nominal_gpus": 32,
                    "preemption": {"reclaimWithinCohort": "LowerPriority"},
                },
            ],
        }
    )
    first = replay(jobs, policy)
    assert first == replay(jobs, policy, prune=False)
    assert sum(o.preemptions for o in first.jobs) > 0


# --- a ResourceQuota charges a job from its admission; the node scoring --------------------------------


def test_a_teams_quota_is_held_by_its_pending_job_from_admission_as_a_resource_quota_is() -> None:
    jobs = [
        job("b1", 0, 100, gpus=8, team="b"),
        job("a-low", 1, 50, gpus=4, team="a"),
        job("a-high", 2, 50, gpus=4, team="a", tier="high"),
    ]
    out = run(jobs, quotas={"a": 4}, preemption={"high": "never"})
    # a-low's pods were made at 1 and count against the quota while they wait for b1's node: a-high, made
    # after, is refused by the quota until a-low ends, though its priority is higher.
    assert out["a-low"].started == 100 and out["a-high"].started == 150


def test_least_allocated_spreads_pods_where_most_allocated_packs_them() -> None:
    jobs = [job("x", 0, 100), job("y", 1, 100), job("z", 2, 10, gpus=4)]
    nodes = {"count": 2, "gpus": 4}
    assert run(jobs, nodes=nodes)["z"].started == 2  # x and y share a node: the other is whole
    spread = run(jobs, nodes=nodes, scoring="LeastAllocated")
    assert spread["z"].started == 100  # one on each node: z waits for x to end
