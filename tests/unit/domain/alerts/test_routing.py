"""The routing tree: which receiver an alert lands on, and the group it joins there."""

from __future__ import annotations

from tests.unit.domain.alerts.builders import alert_labels, route
from watchtower.domain.alerts.routing import GROUP_BY_ALL

TREE = route(
    "default",
    routes=(
        route(
            "vision",
            path="0.0",
            matchers=['team="vision-team"'],
            routes=(route("vision-pager", path="0.0.0", matchers=['severity="critical"']),),
        ),
        route("nlp", path="0.1", matchers=['team="nlp-team"']),
    ),
)


def receivers(labels):
    return [r.receiver for r in TREE.match(labels)]


def test_the_deepest_matching_node_takes_the_alert():
    assert receivers(alert_labels("train", severity="critical")) == ["vision-pager"]
    assert receivers(alert_labels("train", severity="warning")) == ["vision"]


def test_an_alert_no_child_matches_stays_at_the_root():
    assert receivers(alert_labels("bert", team="speech-team")) == ["default"]


def test_children_of_a_node_that_does_not_match_are_never_reached():
    # The pager is under the vision route: a critical of another team does not reach it.
    assert receivers(alert_labels("bert", team="nlp-team", severity="critical")) == ["nlp"]


def test_the_group_key_depends_on_the_route_and_the_group_by_labels_only():
    r = route(group_by=("alertname", "team"))
    a, b = alert_labels("train"), alert_labels("eval")
    assert r.group_key(a) == r.group_key(b) == "{0}:{alertname='WorkloadWaitWarning',team='vision-team'}"
    assert r.group_key(alert_labels("bert", team="nlp-team")) != r.group_key(a)
    assert route(path="0.1", group_by=("alertname", "team")).group_key(a) != r.group_key(a)


def test_a_group_by_label_the_alert_lacks_is_left_out_and_all_labels_group_by_everything():
    assert route(group_by=("alertname", "cluster")).group_labels(alert_labels()) == {
        "alertname": "WorkloadWaitWarning"
    }
    assert route(group_by=(GROUP_BY_ALL,)).group_labels(alert_labels()) == alert_labels()


def test_walk_lists_every_node_depth_first():
    assert [r.path for r in TREE.walk()] == ["0", "0.0", "0.0.0", "0.1"]
