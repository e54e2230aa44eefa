"""A replay's figures per tier and per team, as the JSON the results carry."""

from __future__ import annotations

import orjson
import pytest

from watchtower.replay.engine import replay
from watchtower.replay.policy import policy_from_mapping
from watchtower.replay.results import summarise, wait_figures
from watchtower.replay.trace import TraceJob


def job(id: str, at: float, run: float, gpus: int, tier: str, team: str, priority: int) -> TraceJob:
    return TraceJob(id, team, tier, priority, at, run, 1, gpus)


def test_wait_figures_are_the_mean_and_nearest_rank_percentiles() -> None:
    figures = wait_figures(float(x) for x in range(1, 101))
    assert figures == {"mean": 50.5, "p50": 50.0, "p95": 95.0, "p99": 99.0, "max": 100.0}
    assert wait_figures([]) == dict.fromkeys(("mean", "p50", "p95", "p99", "max"))


def test_the_summary_groups_waits_preemptions_and_losses_by_tier_and_team() -> None:
    jobs = [
        job("l1", 0, 1000, 8, "low", "a", 0),
        job("h1", 100, 100, 8, "high", "b", 900_000),
        job("big", 0, 10, 16, "low", "a", 0),
    ]
    policy = policy_from_mapping({"nodes": {"count": 1, "gpus": 8}, "termination_grace": 0})
    out = summarise(replay(jobs, policy), [t.name for t in policy.tier_policy().tiers])
    assert orjson.loads(orjson.dumps(out)) == out  # plain JSON
    assert [t["tier"] for t in out["tiers"]] == ["high", "low"]
    high, low = out["tiers"]
    assert high["jobs"] == 1 and high["wait_seconds"]["max"] == 0 and high["preemptions"] == 0
    assert low["jobs"] == 2 and low["refused"] == 1 and low["preemptions"] == 1
    assert low["wait_seconds"]["mean"] == 100  # l1 waited 100 s for h1 after it was preempted
    assert low["gpu_hours_lost"] == pytest.approx(8 * 100 / 3600)
    assert [t["team"] for t in out["teams"]] == ["a", "b"]
    assert out["teams"][1]["attainment"] == 1.0  # b never waited
    assert out["teams"][0]["attainment"] == pytest.approx(
        1100 / 1200
    )  # a ran 1100 s of its 1200 in the system
    assert out["jain_index"] == pytest.approx((1 + 11 / 12) ** 2 / (2 * (1 + (11 / 12) ** 2)))
    assert out["refusals"] == [
        {"id": "big", "reason": "a pod asks 16 GPUs; no node has that much (the largest has 8 GPUs)"}
    ]
    assert out["utilisation"] == pytest.approx(1.0)  # busy from the first submission to the last finish
    assert out["preemptions"] == 1


def test_an_empty_trace_gives_empty_figures() -> None:
    out = summarise(replay([], policy_from_mapping({"nodes": {"count": 1, "gpus": 8}})))
    assert (out["jobs"], out["tiers"], out["teams"], out["utilisation"], out["jain_index"]) == (
        0,
        [],
        [],
        None,
        None,
    )
