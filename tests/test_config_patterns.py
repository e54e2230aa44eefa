"""The configuration's regular expressions (route matchers, the training image pattern) are RE2's, checked
when the file is read: a pattern RE2 refuses is a problem at its YAML path naming why; a catastrophic one
that RE2 matches in linear time is accepted."""

from __future__ import annotations

import pytest

from watchtower.config import ConfigError, settings_from_mapping


def _route(matcher: str) -> dict[str, object]:
    return {
        "alerting": {
            "route": {"receiver": "hook", "routes": [{"matchers": [matcher], "receiver": "hook"}]},
            "receivers": [{"name": "hook", "webhooks": [{"url": "http://127.0.0.1:9/"}]}],
        }
    }


@pytest.mark.parametrize(
    ("matcher", "reason"),
    [('namespace=~"(?!kube-).*"', "(?!"), ('team!~"(a)\\\\1"', "\\1"), ('workload=~"x{2000}"', "{2000}")],
)
def test_a_route_matcher_re2_refuses_is_a_problem_at_its_path(matcher: str, reason: str) -> None:
    with pytest.raises(ConfigError) as e:
        settings_from_mapping(_route(matcher), env={})
    (problem,) = [p for p in e.value.problems if p.startswith("alerting.route.routes[0].matchers")]
    assert "RE2" in problem and reason in problem, problem


def test_an_image_pattern_re2_refuses_is_a_problem_at_its_path() -> None:
    with pytest.raises(ConfigError) as e:
        settings_from_mapping({"training": {"image_pattern": "paddle(?=/)"}}, env={})
    (problem,) = [p for p in e.value.problems if p.startswith("training.image_pattern")]
    assert "RE2" in problem and "(?=" in problem, problem


def test_catastrophic_patterns_are_accepted_since_re2_matches_them_in_linear_time() -> None:
    s = settings_from_mapping(
        {**_route('namespace=~"(.*.*)*X"'), "training": {"image_pattern": "(x+x+)+y"}}, env={}
    )
    (child,) = s.alerting.route_tree().routes
    assert not child.match({"namespace": "a" * 40}) and child.match({"namespace": "aX"}) == [child]
    assert s.training.image_pattern == "(x+x+)+y"
