"""The fairness reader's rules path against the real Prometheus: the known week of known_week.py backfilled
by `promtool tsdb create-blocks-from openmetrics`, the generated group watchtower.fairness.usage.rules
backfilled by `promtool tsdb create-blocks-from rules` against it, Prometheus restarted to load the blocks.

Why the figures are exact by construction. Prometheus evaluates a rule group at k·300 s + o, o a hash of the
group's name and rule-file path (random here: the path is a temporary directory; that was the earlier
attempt's flaky one-step difference), while subquery steps fall on k·300 s. The reader pairs the recorded
instant k·300 + o with the subquery step k·300, and both see the same samples exactly when none lands in
(k·300, k·300 + o]. So the test first learns o (the group backfilled over an empty Prometheus: its
evaluation-time series is recorded whatever the data), then samples the week once a step at o + (300 − o)/2
after each step, with KSM read through a bridge of one step (scrape interval 150 s): each instant of either
path sees the one sample of the step before it, every lookback and range included."""

from __future__ import annotations

import asyncio
import re
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from alerts.params import params_from
from alerts.recording import fairness_usage_group
from alerts.render import to_yaml
from tests.prometheus.known_week import (
    DAY,
    END,
    EXPECTED_CLUSTER,
    EXPECTED_TEAMS,
    STEP,
    T0,
    THETA,
    openmetrics,
)
from tests.prometheus.prom_server import PrometheusProcess, backfill
from watchtower.adapters.prometheus.fairness import PrometheusFairness
from watchtower.adapters.prometheus.reader import PrometheusReader
from watchtower.config import settings_from_mapping
from watchtower.domain.fairness.usage import UsageFigures
from watchtower.domain.promql.exporters import ExporterQueries
from watchtower.domain.promql.fairness import FairnessQueries
from watchtower.domain.promql.names import FAIRNESS_EVALUATION
from watchtower.domain.promql.own import OwnQueries

SCRAPE = 150.0  # KSM bridge = 2 scrapes = one step: a sample a step old is still seen, two steps old not
SETTINGS = {"prometheus": {"url": "http://127.0.0.1:9", "scrape_interval": SCRAPE, "idle_threshold": THETA}}


def _fairness(url: str, *, use_rules: bool = True) -> PrometheusFairness:
    s = settings_from_mapping(SETTINGS, env={})
    assert s.prometheus is not None
    queries = FairnessQueries(
        ExporterQueries(s.prometheus.query_config(s.teams.label)), OwnQueries(s.artefacts.job_selector)
    )
    reader = PrometheusReader(url=url, timeout=60, retries=1)
    return PrometheusFairness(reader, queries, idle_threshold=THETA, use_rules=use_rules)


def _backfill_rules(rules: Path, url: str, out: Path, start: float, end: float) -> None:
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "rules",
            f"--start={start:.0f}",
            f"--end={end:.0f}",
            f"--url={url}",
            f"--output-dir={out}",
            str(rules),
        ],
        check=True,
        capture_output=True,
    )


def _move_blocks(src: Path, data: Path) -> None:
    for block in src.iterdir():
        if block.is_dir() and (block / "meta.json").exists():
            shutil.move(str(block), str(data / block.name))


def _offset_ms(blocks: Path) -> int:
    """The group's evaluation offset within the step, from the evaluation-time series promtool wrote."""
    (blocks / "wal").mkdir(exist_ok=True)  # `tsdb dump` opens a WAL; promtool's output has none
    dump = subprocess.run(
        ["promtool", "tsdb", "dump", str(blocks)], check=True, capture_output=True, text=True
    ).stdout
    stamps = {int(m) for m in re.findall(rf"{re.escape(FAIRNESS_EVALUATION)}.*? (\d+)$", dump, re.M)}
    assert stamps, f"no {FAIRNESS_EVALUATION} sample in the probe's blocks:\n{dump[:2000]}"
    offsets = {t % int(STEP * 1000) for t in stamps}
    assert len(offsets) == 1, offsets
    return offsets.pop()


@dataclass
class Stages:
    offset: float  # o, seconds
    raw_only: UsageFigures
    rules_from_day_3: UsageFigures
    rules: UsageFigures
    subqueries: UsageFigures


def _week(url: str, *, use_rules: bool = True) -> UsageFigures:
    f = _fairness(url, use_rules=use_rules)
    try:
        return asyncio.run(f.week_usage(T0, END, STEP))
    finally:
        f.reader.close()


@pytest.fixture(scope="module")
def stages(tmp_path_factory: pytest.TempPathFactory, real_prometheus: None) -> Iterator[Stages]:
    tmp = tmp_path_factory.mktemp("prom-fairness-rules")
    rules = tmp / "rules" / "watchtower-rules.yaml"
    rules.parent.mkdir()
    group = fairness_usage_group(params_from(settings_from_mapping(SETTINGS, env={})))
    rules.write_text(to_yaml({"groups": [group]}, command="test"))
    data = tmp / "data"
    data.mkdir()
    prom = PrometheusProcess(config="global:\n  scrape_interval: 1m\n", data_dir=data)
    try:
        prom.start()  # empty: only the evaluation-time rule records anything
        _backfill_rules(rules, prom.url, tmp / "probe", T0, T0 + 3 * STEP)
        prom.stop()
        o = _offset_ms(tmp / "probe") / 1000
        backfill(openmetrics(sample=int(STEP), offset=o + (STEP - o) / 2), data)
        prom.start()
        raw_only = _week(prom.url)
        # Rules added mid-week: recorded from day 3 on (to one step past the end, where the reader reads).
        _backfill_rules(rules, prom.url, tmp / "late", T0 + 3 * DAY, END + STEP)
        prom.stop()
        _move_blocks(tmp / "late", data)
        prom.start()
        late = _week(prom.url)
        _backfill_rules(rules, prom.url, tmp / "early", T0, T0 + 3 * DAY)
        prom.stop()
        _move_blocks(tmp / "early", data)
        prom.start()
        yield Stages(o, raw_only, late, _week(prom.url), _week(prom.url, use_rules=False))
    finally:
        prom.stop()


def _exact(v: float | None) -> object:
    return None if v is None else pytest.approx(v, rel=1e-9)


def _teams(u: UsageFigures) -> dict[str, dict[str, float | None]]:
    return {
        t: {
            "gpu_hours": x.gpu_hours,
            "idle_gpu_hours": x.idle_gpu_hours,
            "cpu_core_hours": x.cpu_core_hours,
            "memory_gib_hours": x.memory_gib_hours,
            "quota_gpus": x.quota_gpus,
        }
        for t, x in u.teams.items()
    }


def _cluster(u: UsageFigures) -> dict[str, float | None]:
    assert u.cluster is not None
    return {k: getattr(u.cluster, k) for k in EXPECTED_CLUSTER}


HAND_TEAMS = {t: {k: _exact(v) for k, v in f.items()} for t, f in EXPECTED_TEAMS.items()}
HAND_CLUSTER = {k: _exact(v) for k, v in EXPECTED_CLUSTER.items()}


def test_the_rules_path_gives_the_hand_counted_week(stages: Stages) -> None:
    got = stages.rules
    assert (got.path, got.recorded_hours) == ("rules", pytest.approx(168.0, abs=STEP / 3600))
    assert _teams(got) == HAND_TEAMS
    assert _cluster(got) == HAND_CLUSTER


def test_the_rules_path_equals_the_subquery_path_on_the_same_data(stages: Stages) -> None:
    sub, rules = stages.subqueries, stages.rules
    assert sub.path == "subqueries" and "not used" in sub.path_reason
    assert _teams(rules) == {t: {k: _exact(v) for k, v in f.items()} for t, f in _teams(sub).items()}
    assert _cluster(rules) == {k: _exact(v) for k, v in _cluster(sub).items()}
    assert rules.coverage == sub.coverage


def test_a_week_without_recorded_series_takes_the_subquery_path_and_says_so(stages: Stages) -> None:
    got = stages.raw_only
    assert (got.path, got.recorded_hours) == ("subqueries", 0.0)
    assert "no recording-rule series" in got.path_reason
    assert _teams(got) == HAND_TEAMS and _cluster(got) == HAND_CLUSTER


def test_rules_added_mid_week_leave_the_week_to_the_subqueries(stages: Stages) -> None:
    got = stages.rules_from_day_3
    assert got.path == "subqueries"
    # Recorded from day 3 to the end: 4 days of the 162 raw hours.
    assert got.recorded_hours == pytest.approx(96.0, abs=STEP / 3600)
    assert "cover 96.0 h of the 162.0 h" in got.path_reason
    assert _teams(got) == HAND_TEAMS and _cluster(got) == HAND_CLUSTER
