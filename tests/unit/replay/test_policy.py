"""The replay's policy file: defaults from the configuration, and every mistake named by its path."""

from __future__ import annotations

import pytest

from watchtower.config.model import Settings
from watchtower.replay.policy import PolicyError, policy_from_mapping


def test_an_empty_policy_takes_the_configurations_tiers_and_kube_schedulers_rules() -> None:
    p = policy_from_mapping({})
    assert p.tier_policy() == Settings().tier_policy()
    assert p.may_preempt("medium") == "lower"
    assert p.termination_grace == 30.0
    assert p.restart.mode == "restart" and p.restart.checkpoint_every is None
    assert p.quotas == {} and p.cluster_queues == []


def test_identical_nodes_are_written_once_and_listed_by_name() -> None:
    p = policy_from_mapping({"nodes": {"count": 3, "gpus": 8, "cpu": 64}})
    assert [(n.name, n.gpus, n.cpu) for n in p.node_list()] == [
        ("node-0", 8, 64),
        ("node-1", 8, 64),
        ("node-2", 8, 64),
    ]
    listed = policy_from_mapping({"nodes": [{"name": "a100-1", "gpus": 8}, {"name": "t4-1", "gpus": 1}]})
    assert [n.name for n in listed.node_list()] == ["a100-1", "t4-1"]


def test_a_policy_without_nodes_says_how_to_give_them() -> None:
    with pytest.raises(ValueError, match=r"nodes: \{count: 16, gpus: 8\}"):
        policy_from_mapping({}).node_list()


def test_the_whole_policy_file_reads() -> None:
    p = policy_from_mapping(
        {
            "name": "medium preempts",
            "tiers": [
                {"name": "high", "min_priority": 1000, "warn_after": "15m", "critical_after": "1h"},
                {"name": "low", "min_priority": 0, "warn_after": "2h", "critical_after": "8h"},
            ],
            "nodes": {"count": 16, "gpus": 1},
            "quotas": {"nlp": 8},
            "preemption": {"high": ["low"], "low": "never"},
            "termination_grace": "2m",
            "restart": {"mode": "restart", "checkpoint_every": "1h"},
            "cluster_queues": [
                {"name": "research", "teams": ["nlp"], "nominal_gpus": 8, "borrowing_limit": 4}
            ],
        }
    )
    assert [t.name for t in p.tier_policy().tiers] == ["high", "low"]
    assert p.may_preempt("high") == ["low"] and p.may_preempt("low") == "never"
    assert p.termination_grace == 120.0 and p.restart.checkpoint_every == 3600.0
    assert p.cluster_queues[0].borrowing_limit == 4


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        ({"colour": 1}, "colour: Extra inputs are not permitted"),
        ({"nodes": {"count": 0, "gpus": 1}}, "nodes.count: Input should be greater than or equal to 1"),
        ({"nodes": [{"name": "a", "gpus": -1}]}, "nodes[0].gpus: Input should be greater than or equal to 0"),
        ({"nodes": [{"name": "a", "gpus": 1}, {"name": "a", "gpus": 2}]}, "nodes: node names must be unique"),
        ({"preemption": {"medium": "sometimes"}}, "preemption.medium: Input should be 'lower' or 'never'"),
        ({"preemption": {"medium": ["low", "lowest"]}}, "preemption.medium: unknown tier 'lowest'"),
        ({"preemption": {"urgent": "never"}}, "preemption.urgent: unknown tier 'urgent'"),
        ({"quotas": {"nlp": -1}}, "quotas: team 'nlp': a quota cannot be negative (-1)"),
        ({"termination_grace": "soon"}, "termination_grace: 'soon' is not a duration"),
        ({"restart": {"mode": "rewind"}}, "restart.mode: Input should be 'restart' or 'resume'"),
        ({"restart": {"checkpoint_every": "0s"}}, "restart.checkpoint_every: must be longer than 0s"),
        (
            {"tiers": [{"name": "a", "min_priority": 1, "warn_after": "1m", "critical_after": "30s"}]},
            "tiers[0]: critical_after (30s) is shorter than warn_after (60s)",
        ),
        (
            {
                "tiers": [
                    {"name": "a", "min_priority": 1, "warn_after": "1m", "critical_after": "2m"},
                    {"name": "a", "min_priority": 2, "warn_after": "1m", "critical_after": "2m"},
                ]
            },
            "tiers: tier names must be unique; repeated: a",
        ),
        (
            {
                "cluster_queues": [
                    {"name": "q1", "teams": ["nlp"], "nominal_gpus": 4},
                    {"name": "q2", "teams": ["nlp"], "nominal_gpus": 4},
                ]
            },
            "cluster_queues[1].teams: team 'nlp' is already in queue 'q1'",
        ),
        (
            {"cluster_queues": [{"name": "q", "teams": ["nlp"], "nominal_gpus": 4, "borrowing_limit": -1}]},
            "cluster_queues[0].borrowing_limit: Input should be greater than or equal to 0",
        ),
    ],
)
def test_a_bad_policy_names_the_path_of_each_problem(data: dict[str, object], problem: str) -> None:
    with pytest.raises(PolicyError) as e:
        policy_from_mapping(data, source="what-if.yaml")
    assert any(p.startswith(problem) for p in e.value.problems), e.value.problems
    assert str(e.value).startswith("what-if.yaml: ")
