"""The weekly report's "What if" figures, worked out by hand from a two-job week on one 2-GPU node.

The week: `a` (nlp, low, 2 GPUs, 100 s) arrives at 0 and starts at once; `b` (vision, high, 2 GPUs, 50 s)
arrives at 10 and was observed to start at 100, when `a` ended (no preemption happened). Replayed as
configured (a higher priority preempts a lower one, a 30 s grace, a restart loses the run): `b` preempts `a`
at 10 and starts at 40 (waited 30 s); `a` waits from 40 to 90 (50 s) and runs again for 100 s.
"""

from __future__ import annotations

from typing import Any

from watchtower.config.model import Settings
from watchtower.domain.fairness.what_if import WhatIf
from watchtower.replay.policy import NodeSpec
from watchtower.replay.trace import TraceJob
from watchtower.replay.what_if import NO_JOBS, policy_problems, what_if

TIERS = Settings().tiers
JOBS = [
    TraceJob("a", "nlp", "low", 0, 0.0, 100.0, 1, 2, started=0.0),
    TraceJob("b", "vision", "high", 900_000, 10.0, 50.0, 1, 2, started=100.0),
]
NODES = [NodeSpec(name="gpu-1", gpus=2)]


def tier(name: str, min_priority: int) -> dict[str, Any]:
    return {"name": name, "min_priority": min_priority, "warn_after": "1h", "critical_after": "2h"}


def waits(w: WhatIf, tier_name: str) -> dict[str, tuple[int, float | None, float | None]]:
    t = next(t for t in w.tiers if t.tier == tier_name)
    return {f.run: (f.jobs, f.p50, f.p95) for f in t.runs}


def r6(*xs: float | None) -> tuple[float | None, ...]:
    return tuple(None if x is None else round(x, 6) for x in xs)


def team(w: WhatIf, name: str) -> dict[str, tuple[float | None, ...]]:
    t = next(t for t in w.teams if t.team == name)
    return {f.run: r6(f.wait_mean, f.attainment, f.wait_change, f.attainment_change) for f in t.runs}


def test_each_tier_shows_observed_the_configuration_replayed_and_each_policy() -> None:
    w = what_if(JOBS, NODES, TIERS, [("no preemption", {"preemption": {"high": "never"}})])
    assert [(r.name, r.kind, r.jobs, r.preemptions) for r in w.runs] == [
        ("observed", "observed", 2, None),
        ("as configured", "configured", 2, 1),
        ("no preemption", "policy", 2, 0),
    ]
    assert [t.tier for t in w.tiers] == ["high", "low"]  # the configuration's order, tiers with jobs only
    assert waits(w, "high") == {
        "observed": (1, 90.0, 90.0),
        "as configured": (1, 30.0, 30.0),  # the grace
        "no preemption": (1, 90.0, 90.0),  # behind `a`, as observed
    }
    assert waits(w, "low") == {
        "observed": (1, 0, 0),
        "as configured": (1, 50.0, 50.0),
        "no preemption": (1, 0, 0),
    }
    assert w.failures == () and w.empty is None


def test_each_team_shows_the_change_in_wait_and_attainment_against_the_configuration_replayed() -> None:
    w = what_if(JOBS, NODES, TIERS, [("no preemption", {"preemption": {"high": "never"}})])
    # nlp as configured: held 2 GPUs for 40 s (10 s run + 30 s grace) and 100 s, waited 50 s:
    # attainment 280 / (280 + 100).
    assert team(w, "nlp") == {
        "observed": r6(0.0, 1.0, None, None),
        "as configured": r6(50.0, 280 / 380, None, None),
        "no preemption": r6(0.0, 1.0, -50.0, 1 - 280 / 380),
    }
    # vision observed: 2 GPUs for 50 s after 90 s waiting; as configured, after 30 s.
    assert team(w, "vision") == {
        "observed": r6(90.0, 100 / 280, None, None),
        "as configured": r6(30.0, 100 / 160, None, None),
        "no preemption": r6(90.0, 100 / 280, 60.0, 100 / 280 - 100 / 160),
    }
    assert [t.team for t in w.for_teams(["vision"]).teams] == ["vision"]


def test_a_policy_that_moves_a_tier_moves_its_jobs_and_one_tier_runs_first_come_first_served() -> None:
    low_first = [tier("critical", 1_000_000), tier("low", 950_000), tier("high", 900_000)]
    one_tier = [tier("all", 0)]
    w = what_if(JOBS, NODES, TIERS, [("low first", {"tiers": low_first}), ("one tier", {"tiers": one_tier})])
    # `low` raised above `high`: `a` (priority 0 + 950,000) is no longer preempted by `b` (900,000).
    assert waits(w, "high")["low first"] == (1, 90.0, 90.0)
    assert waits(w, "low")["low first"] == (1, 0, 0)
    # One tier: both jobs at its min_priority, in arrival order: `a` runs, `b` waits 90 s.
    assert waits(w, "all") == {
        "observed": (0, None, None),
        "as configured": (0, None, None),
        "low first": (0, None, None),
        "one tier": (2, 0, 90.0),
    }


def test_a_replay_that_cannot_run_is_named_with_why_and_the_others_still_run() -> None:
    w = what_if(JOBS, [], TIERS, [("own nodes", {"nodes": {"count": 1, "gpus": 2}}), ("no nodes", {})])
    assert [(f.policy, f.why) for f in w.failures] == [
        ("as configured", "no nodes were recorded for the week and the policy names none (give it `nodes:`)"),
        ("no nodes", "no nodes were recorded for the week and the policy names none (give it `nodes:`)"),
    ]
    assert [r.name for r in w.runs] == ["observed", "own nodes"]
    # No configuration replayed to compare with: the changes are unknown, never 0.
    assert team(w, "nlp")["own nodes"][2:] == (None, None)


def test_a_week_without_recorded_jobs_says_so_in_one_line() -> None:
    w = what_if([], NODES, TIERS, [("p", {})])
    assert (w.empty, w.runs, w.tiers, w.teams, w.policies) == (NO_JOBS, (), (), (), ("p",))


def test_a_what_if_policy_is_checked_as_a_policy_file_is_its_nodes_optional() -> None:
    assert policy_problems("p", {"preemption": {"high": "never"}}, TIERS) == []
    assert policy_problems("p", {"preemptoin": {}}, TIERS) == ["preemptoin: Extra inputs are not permitted"]
    assert policy_problems("p", {"preemption": {"medium": ["lowest"]}}, TIERS) == [
        "preemption.medium: unknown tier 'lowest' (tiers: critical, high, medium, low)"
    ]
