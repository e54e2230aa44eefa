"""Label values built into PromQL are string literals whatever they hold: a quote, a backslash or a newline
in a tier, a team pattern or a resource name selects exactly that value and cannot end the selector, as the
real promtool evaluates it."""

from __future__ import annotations

import ast
import subprocess
from pathlib import Path

import pytest
import yaml

from watchtower.domain.promql.exporters import ExporterQueries, QueryConfig
from watchtower.domain.promql.own import OwnQueries
from watchtower.domain.promql.syntax import quoted

# Each would end the selector if pasted between quotes: `"} or vector(1) #` adds a series of its own.
HOSTILE = ['x"} or vector(1) #', "not\\na newline", "two\nlines", 'q"', "\\", "cr\rlf", ""]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_quoted_value_reads_back_as_itself(value: str) -> None:
    # PromQL's double-quoted strings escape \\, \", \n and \r as Python's literals do.
    text = quoted(value)
    assert "\n" not in text and "\r" not in text
    assert ast.literal_eval(text) == value


def test_builders_quote_tier_team_and_resource() -> None:
    own, q = OwnQueries('job="w"'), ExporterQueries(QueryConfig())
    assert 'tier="x\\"} or vector(1) #"}' in own.pending(tier=HOSTILE[0])
    assert 'tier="two\\nlines"}' in own.oldest_wait(tier="two\nlines")
    assert 'tier="q\\""}' in own.most_preemptions(tier='q"')
    assert 'team=~"a\\"b|c\\\\.d"}' in own.team_waiting_gpus(team='a"b|c\\.d')
    assert 'team=~"\\\\"}' in own.team_oldest_wait(team="\\")
    assert 'resource="x\\"} or vector(1) #"' in q.pod_requests(HOSTILE[0])


def test_promtool_selects_exactly_the_hostile_values(promtool: str, tmp_path: Path) -> None:
    """A rule built from hostile values parses and picks the series carrying them, nothing else (the
    series below are written by hand, not by `quoted`)."""
    own = OwnQueries('job="w"')
    rules = {
        "groups": [
            {
                "name": "literals",
                "rules": [
                    {"record": "picked_tier", "expr": own.pending(tier=HOSTILE[0])},
                    # `team` is a pattern (=~): a quote, a backslash escaping the dot, an alternative.
                    {"record": "picked_team", "expr": own.team_waiting_gpus(team='a"b|c\\.d')},
                ],
            }
        ]
    }
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rules))
    series = [
        ('watchtower_pending_workloads{job="w",tier="x\\"} or vector(1) #"}', "7x5"),
        ('watchtower_pending_workloads{job="w",tier="x"}', "100x5"),
        ('watchtower_waiting_gpus{job="w",team="a\\"b",tier="low"}', "3x5"),
        ('watchtower_waiting_gpus{job="w",team="c.d",tier="low"}', "4x5"),
        ('watchtower_waiting_gpus{job="w",team="cxd",tier="low"}', "50x5"),
    ]
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": [{"series": s, "values": v} for s, v in series],
                "promql_expr_test": [
                    {
                        "expr": "picked_tier",
                        "eval_time": "2m",
                        "exp_samples": [{"labels": "picked_tier", "value": 7}],
                    },
                    {
                        "expr": "picked_team",
                        "eval_time": "2m",
                        "exp_samples": [{"labels": "picked_team", "value": 7}],
                    },
                ],
            }
        ],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests))
    done = subprocess.run(
        [promtool, "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr
