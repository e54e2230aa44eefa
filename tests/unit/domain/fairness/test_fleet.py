"""The fleet's combination of cluster reports (domain/fairness/fleet.py) and the engine's answers cut by
cluster (adapters/prometheus/fleet_reader.py), on hand-made reports and answers."""

from __future__ import annotations

from dataclasses import replace

import pytest

from tests.reports.sample import nlp, report, vision
from watchtower.adapters.prometheus.fleet_reader import ClusterView, FleetAnswers
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.domain.fairness.fleet import combine
from watchtower.domain.fairness.report import TierWaits
from watchtower.domain.gpu_usage import Sample


def test_figures_add_up_over_the_clusters_and_a_missing_one_is_named_not_zero() -> None:
    a = report(teams=(vision(2016.0), nlp()))
    quiet = replace(vision(1000.0), waits=(TierWaits("low", 0, None, None, None, 0, None),))
    b = report(teams=(quiet,))
    got = combine("2026-W47", 0.0, 1.0, 2.0, {"a": a, "b": b, "gone": a}, {"gone": "down", "dead": "down"})
    assert got.missing == ("dead", "gone")
    assert [c.name for c in got.clusters] == ["a", "b", "dead", "gone"]
    assert [c.used for c in got.clusters if c.missing] == [None, None]
    v = next(t for t in got.teams if t.team == "vision")
    assert [c.cluster for c in v.clusters] == ["a", "b"]
    assert v.used == 3016.0 and v.entitlement == 2 * 3360.0
    assert v.attainment == pytest.approx(3016.0 / 6720.0)
    # x = min(1, ΣU / Σ min(D, F)): D 2500 (F 4032) in each cluster.
    assert v.satisfaction == pytest.approx(min(1.0, 3016.0 / 5000.0))
    assert v.waited_in == ("a",)
    n = next(t for t in got.teams if t.team == "nlp")
    assert [c.cluster for c in n.clusters] == ["a"]  # in one cluster only: not an error
    xs = [t.satisfaction for t in got.teams if t.satisfaction is not None]
    assert got.jain == pytest.approx(sum(xs) ** 2 / (len(xs) * sum(x * x for x in xs)))
    assert got.used == pytest.approx(sum(t.used for t in got.teams if t.used is not None))


def test_a_team_with_unknown_usage_everywhere_has_no_fleet_figures() -> None:
    got = combine("2026-W47", 0.0, 1.0, 2.0, {"a": report(teams=(vision(None),))}, {})
    (v,) = got.teams
    assert (v.used, v.attainment, v.satisfaction) == (None, None, None)
    assert got.jain is None and got.teams_with_demand == 0


class _Engine(PrometheusReader):
    def __init__(self) -> None:
        super().__init__(url="http://127.0.0.1:1")
        self.asked: list[str] = []

    def query_sync(self, promql: str, *, at: float | None = None) -> list[Sample]:
        self.asked.append(promql)
        if "fallback" in promql:
            return [Sample({"cluster": "a"}, 1.0), Sample({}, 0.0)]
        return [Sample({"cluster": "a", "team": "t"}, 1.0), Sample({"cluster": "b", "team": "t"}, 2.0)]


def test_each_query_is_asked_once_by_cluster_and_cut_for_each() -> None:
    engine = _Engine()
    answers = FleetAnswers(engine, "cluster")
    a, b = ClusterView(answers, "a"), ClusterView(answers, "b")
    assert a.query_sync("sum by (team) (x)", at=5.0) == [Sample({"team": "t"}, 1.0)]
    assert b.query_many_sync(["sum by (team) (x)"], at=5.0) == [[Sample({"team": "t"}, 2.0)]]
    assert engine.asked == ["sum by (cluster, team) (x)"]
    assert answers.sent == [("sum by (cluster, team) (x)", 5.0)]
    assert ClusterView(answers, "c").query_sync("sum by (team) (x)", at=5.0) == []
    # A sample without the label (`or vector(0)`) stands for each cluster that has none of its own.
    assert a.query_sync("sum(fallback) or vector(0)") == [Sample({}, 1.0)]
    assert b.query_sync("sum(fallback) or vector(0)") == [Sample({}, 0.0)]
    assert answers.clusters_seen() == {"a", "b"}
