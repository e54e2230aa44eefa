"""The fairness reader (`PrometheusFairness.week_usage`) against the real Prometheus loaded with the known
week of known_week.py by `promtool tsdb create-blocks-from openmetrics`. Every expected figure is worked out
by hand there; the reader's figures are exact (to float rounding, 1e-9 relative), because no step of the
week falls on a sample and every change happens on a step."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from tests.prometheus.known_week import (
    DAY,
    END,
    EXPECTED_CLUSTER,
    EXPECTED_HOURS_PRESENT,
    EXPECTED_TEAMS,
    STEP,
    T0,
    THETA,
    WEEK,
    openmetrics,
)
from tests.prometheus.prom_server import PrometheusProcess, backfill, free_port
from watchtower.adapters.prometheus.fairness import PrometheusFairness
from watchtower.adapters.prometheus.reader import PrometheusReader, PrometheusUnavailable
from watchtower.config.prometheus import PrometheusConfig
from watchtower.domain.fairness.usage import UsageFigures
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.promql.fairness import FairnessQueries
from watchtower.domain.promql.own import OwnQueries


def _reader_of(url: str, **kw: float) -> PrometheusFairness:
    config = PrometheusConfig(url=url).query_config()
    reader = PrometheusReader(url=url, timeout=kw.get("timeout", 60), retries=int(kw.get("retries", 1)))
    return PrometheusFairness(
        reader, FairnessQueries(ExporterQueries(config), OwnQueries('job="watchtower"')), idle_threshold=THETA
    )


@pytest.fixture(scope="module")
def fairness(tmp_path_factory: pytest.TempPathFactory, real_prometheus: None) -> Iterator[PrometheusFairness]:
    tmp = tmp_path_factory.mktemp("prom-fairness")
    data = tmp / "data"
    backfill(openmetrics(), data)
    prom = PrometheusProcess(config="global:\n  scrape_interval: 1m\n", data_dir=data)
    prom.start()
    reader = _reader_of(prom.url)
    try:
        yield reader
    finally:
        reader.reader.close()
        prom.stop()


@pytest.fixture(scope="module")
def week(fairness: PrometheusFairness) -> UsageFigures:
    return asyncio.run(fairness.week_usage(T0, END, STEP))


def _exact(v: float | None) -> object:
    return None if v is None else pytest.approx(v, rel=1e-9)


def test_each_teams_week_matches_the_hand_count(week: UsageFigures) -> None:
    got = {
        t: {
            "gpu_hours": u.gpu_hours,
            "idle_gpu_hours": u.idle_gpu_hours,
            "cpu_core_hours": u.cpu_core_hours,
            "memory_gib_hours": u.memory_gib_hours,
            "quota_gpus": u.quota_gpus,
        }
        for t, u in week.teams.items()
    }
    assert got == {t: {k: _exact(v) for k, v in f.items()} for t, f in EXPECTED_TEAMS.items()}


def test_a_team_without_a_quota_has_none_and_a_busy_team_zero_idle_hours(week: UsageFigures) -> None:
    speech = week.teams["speech"]
    assert speech.quota_gpus is None
    assert speech.idle_gpu_hours == 0.0


def test_the_clusters_week_breaks_down_as_counted_by_hand(week: UsageFigures) -> None:
    c = week.cluster
    assert c is not None
    got = {k: getattr(c, k) for k in EXPECTED_CLUSTER}
    assert got == {k: _exact(v) for k, v in EXPECTED_CLUSTER.items()}


def test_the_six_hour_gap_shows_as_coverage_below_one_for_every_source(week: UsageFigures) -> None:
    cov = {c.name: (c.hours_present, c.hours_expected) for c in week.coverage}
    assert cov == {
        name: (pytest.approx(EXPECTED_HOURS_PRESENT), pytest.approx(168.0))
        for name in ("kube-state-metrics", "dcgm-exporter", "watchtower")
    }
    assert all(c.fraction == pytest.approx(162 / 168) for c in week.coverage)


def test_a_week_before_any_data_is_missing_not_zero(
    fairness: PrometheusFairness, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[object] = []
    real = fairness.reader.query_each_sync

    def each(queries: Any, **kw: Any) -> Any:
        asked.append(queries)
        return real(queries, **kw)

    monkeypatch.setattr(fairness.reader, "query_each_sync", each)
    got = asyncio.run(fairness.week_usage(T0 - WEEK, T0, STEP))
    assert got.teams == {} and got.cluster is None
    assert [c.hours_present for c in got.coverage] == [0.0, 0.0, 0.0]
    # The probe found no source: the week's hundred integrals are not asked (each trend week of a new
    # install once cost them on every view).
    assert asked == [] and got.path_reason == "no source has a sample in this week"
    partial = asyncio.run(fairness.week_usage(T0 - WEEK / 2, T0 + WEEK / 2, STEP))
    assert asked and partial.cluster is not None


def test_a_partial_window_counts_only_its_own_steps(fairness: PrometheusFairness) -> None:
    # The first two days: a-0 (8 GPUs) for 48 h, d-0 (2) for 36 h, c-0 (4) for 24 h; no gap.
    got = asyncio.run(fairness.week_usage(T0, T0 + 2 * DAY, STEP))
    assert {t: u.gpu_hours for t, u in got.teams.items()} == {
        "vision": _exact(8 * 48.0),
        "speech": _exact(2 * 36.0),
        "nlp": _exact(4 * 24.0),
    }
    assert all(c.fraction == 1.0 for c in got.coverage)


def test_a_dead_prometheus_is_an_error_not_an_empty_week() -> None:
    dead = _reader_of(f"http://127.0.0.1:{free_port()}", timeout=2, retries=0)
    with pytest.raises(PrometheusUnavailable):
        asyncio.run(dead.week_usage(T0, END, STEP))


def test_a_step_longer_than_the_window_is_refused(fairness: PrometheusFairness) -> None:
    with pytest.raises(ValueError, match="no longer than the window"):
        asyncio.run(fairness.week_usage(T0, T0 + 60, STEP))


def test_the_service_reads_its_own_series_with_the_job_selector_of_the_generated_rules() -> None:
    from watchtower.bootstrap import build_fairness_metrics as fairness_metrics
    from watchtower.config import settings_from_mapping

    assert fairness_metrics(settings_from_mapping({}, env={})) is None
    got = fairness_metrics(
        settings_from_mapping(
            {"prometheus": {"url": "http://127.0.0.1:9"}, "artefacts": {"job_selector": 'job="wt"'}}, env={}
        )
    )
    assert isinstance(got, PrometheusFairness)
    assert 'watchtower_waiting_gpus{job="wt"}' in got.queries.free_while_waiting()
    got.reader.close()


class _CountingReader(PrometheusReader):
    """The real reader, counting the (query, time) pairs the subquery path asks."""

    asked = 0

    def query_each_sync(self, queries: Any, *, workers: int = 2) -> Any:
        self.asked += len(queries)
        return super().query_each_sync(queries, workers=workers)


def test_answers_kept_ahead_give_the_same_week_and_are_not_asked_again(
    fairness: PrometheusFairness, week: UsageFigures
) -> None:
    """What the demo does while its past week is backfilled a day at a time: the days already in blocks
    are asked ahead; the report then asks only the rest, and its figures are those of asking it all."""
    reader = _CountingReader(url=fairness.reader.url, timeout=60, retries=1)
    ahead = PrometheusFairness(reader, fairness.queries, idle_threshold=THETA)
    try:
        kept = ahead.keep_settled(T0, END, STEP, T0 + 3 * DAY + STEP)  # days 1-3 end by then; day 4 does not
        assert kept == reader.asked > 0
        assert ahead.keep_settled(T0, END, STEP, T0 + 3 * DAY + STEP) == kept  # nothing asked twice
        assert reader.asked == kept
        again = ahead.week_usage_sync(T0, END, STEP)
        per_piece = kept // 3
        assert reader.asked == kept + 4 * per_piece  # the four days not kept, not the seven
        assert (again.teams, again.cluster, again.coverage) == (week.teams, week.cluster, week.coverage)
    finally:
        reader.close()
