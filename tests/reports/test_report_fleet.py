"""The fleet's fairness report end to end: a real Prometheus as the global engine holding two clusters'
series under a `cluster` label (the known week of tests/prometheus/known_week.py, promtool backfill; cluster
b without the speech team), each cluster's own Prometheus with its own series unlabelled, two history stores
each served by a real Watchtower (uvicorn on 127.0.0.1) over GET /api/v1/fairness/history, and a dead URL.

The fleet's per-cluster figures must be each cluster's own report (same week, same history, its own
Prometheus); the fleet's sums are sums of them; a team in one cluster only is there and nowhere else; a
dead Watchtower and a cluster the engine has no series for are named missing, never counted."""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.alerting.servers import serve
from tests.prometheus.known_week import openmetrics
from tests.prometheus.prom_server import PrometheusProcess, backfill, free_port, have_prometheus
from tests.reports.test_report_joined import (
    EPISODES,
    HEARTBEATS,
    INCIDENTS,
    NOW,
    PREEMPTIONS,
    THE_WEEK,
    S,
)
from watchtower.adapters.history.sqlite import SQLiteFairnessHistory
from watchtower.adapters.prometheus.fleet_reader import FleetAnswers
from watchtower.api.app import create_app
from watchtower.bootstrap import build_container, build_fairness_metrics
from watchtower.commands.fleet_report import fleet_body
from watchtower.config import settings_from_mapping
from watchtower.domain.fairness.fleet import FleetReport, combine
from watchtower.domain.fairness.report import FairnessReport
from watchtower.domain.health import SourceHealth
from watchtower.runtime.fleet_report import cluster_reports
from watchtower.services.fairness_report import FairnessReports
from watchtower.services.fleet_render import FLEET_FORMATS, render_fleet

pytestmark = pytest.mark.prometheus

TOKEN = "fleet-token"
FAIRNESS = {"fairness": {"enabled": True}}


def without_speech(text: str) -> str:
    """Cluster b: the known week without the speech namespace (its pods, quota and namespace series)."""
    return "\n".join(line for line in text.splitlines() if 'namespace="speech"' not in line) + "\n"


def labelled(text: str, cluster: str) -> str:
    """The series as the engine holds them: each with the cluster's label, as its external label adds it."""
    return re.sub(r"(?m)^([A-Za-z_:][A-Za-z0-9_:]*)\{", rf'\1{{cluster="{cluster}",', text)


def history_of(tmp: Path, name: str, *, speech: bool) -> SQLiteFairnessHistory:
    h = SQLiteFairnessHistory(tmp / f"{name}.db")
    keep = (lambda team: True) if speech else (lambda team: team != "speech")
    h.record(
        [e for e in EPISODES if keep(e.team)],
        [p for p in PREEMPTIONS if keep(p.victim_team) and keep(p.preemptor_team)],
        [i for i in INCIDENTS if keep(i.team)],
        heartbeats=HEARTBEATS,
    )
    return h


class Fleet:
    def __init__(self) -> None:
        self.own: dict[str, FairnessReport] = {}
        self.reports: dict[str, FairnessReport] = {}
        self.missing: dict[str, str] = {}
        self.answers: FleetAnswers | None = None
        self.urls: dict[str, str] = {}
        self.engine = ""
        self.history_body: dict[str, Any] = {}
        self.history_refusals: list[int] = []
        self.bodies: dict[str, str] = {}


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    if not have_prometheus():
        pytest.fail("prometheus/promtool not on PATH: run tests/setup/system-deps.sh")
    tmp = tmp_path_factory.mktemp("report-fleet")
    week = {"a": openmetrics(S), "b": without_speech(openmetrics(S))}
    proms: dict[str, PrometheusProcess] = {}
    for name, text in week.items():
        backfill(text, tmp / f"own-{name}")
        backfill(labelled(text, name), tmp / "engine")
    for name in ("a", "b", "engine"):
        proms[name] = PrometheusProcess(
            config="global:\n  scrape_interval: 1m\n",
            data_dir=tmp / (f"own-{name}" if name != "engine" else name),
        )
        proms[name].start()
    stores = {"a": history_of(tmp, "a", speech=True), "b": history_of(tmp, "b", speech=False)}
    out = Fleet()
    out.engine = proms["engine"].url
    try:
        for name, store in stores.items():
            own = settings_from_mapping({**FAIRNESS, "prometheus": {"url": proms[name].url}}, env={})
            reports = FairnessReports(settings=own, history=store, metrics=build_fairness_metrics(own))
            out.own[name] = asyncio.run(reports.build(THE_WEEK, now=NOW))
        asyncio.run(_served(out, stores))
    finally:
        for s in stores.values():
            s.close()
        for p in proms.values():
            p.stop()
    yield out


async def _served(out: Fleet, stores: dict[str, SQLiteFairnessHistory]) -> None:
    settings = settings_from_mapping({**FAIRNESS, "server": {"api_token": TOKEN}}, env={})

    def app(store: SQLiteFairnessHistory) -> Any:
        c = build_container(
            settings, clock=_Now(), source_health=SourceHealth, source_name="test", history=store
        )
        return create_app(c)

    async with serve(app(stores["a"])) as a, serve(app(stores["b"])) as b:
        dead = f"http://127.0.0.1:{free_port()}"
        # d: a live Watchtower (a's) under a name the engine holds no series for.
        out.urls = {"a": a, "b": b, "c": dead, "d": a}
        fleet_settings = settings_from_mapping(FAIRNESS, env={})
        out.reports, out.missing, out.answers = await cluster_reports(
            fleet_settings, prometheus=out.engine, clusters=out.urls, week=THE_WEEK, now=NOW, token=TOKEN
        )
        async with httpx.AsyncClient() as http:
            where = f"{a}/api/v1/fairness/history"
            r = await http.get(
                where, params={"week": str(THE_WEEK)}, headers={"Authorization": f"Bearer {TOKEN}"}
            )
            out.history_body = r.json()
            for headers, params in (
                ({}, {"week": str(THE_WEEK)}),
                ({"Authorization": "Bearer wrong"}, {"week": str(THE_WEEK)}),
                ({"Authorization": f"Bearer {TOKEN}"}, {"week": "2023-46"}),
            ):
                out.history_refusals.append(
                    (await http.get(where, params=params, headers=headers)).status_code
                )
        # The command line's door, every format, over the same servers (the engine is still up).
        token_file = Path(stores["a"].path).parent / "token"
        token_file.write_text(TOKEN + "\n")
        for fmt in FLEET_FORMATS:
            body = await asyncio.to_thread(
                fleet_body,
                lambda: fleet_settings,
                str(THE_WEEK),
                fmt,
                out.engine,
                [f"a={a}", f"b={b}", f"c={dead}"],
                token_file,
                now=NOW,
            )
            out.bodies[fmt] = body.decode()
        # The same clusters from the configuration's fleet.clusters, each with its own token file.
        listed = {
            **FAIRNESS,
            "fleet": {
                "clusters": [
                    {"name": "a", "url": a, "token_file": str(token_file)},
                    {"name": "b", "url": b, "token_file": str(token_file)},
                    {"name": "c", "url": dead},
                ]
            },
        }
        from_config = settings_from_mapping(listed, env={})
        body = await asyncio.to_thread(
            fleet_body, lambda: from_config, str(THE_WEEK), "json", out.engine, [], None, now=NOW
        )
        out.bodies["json-from-config"] = body.decode()


class _Now:
    def now(self) -> float:
        return NOW


def plain(report: FairnessReport) -> Any:
    return msgspec.to_builtins(report)


def close(a: Any, b: Any, path: str = "") -> None:
    """Equal, floats to float rounding: the engine adds the same samples `by (cluster, team)`."""
    if isinstance(a, float) and isinstance(b, float):
        assert math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9), path
    elif isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            close(a[k], b[k], f"{path}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            close(x, y, f"{path}[{i}]")
    else:
        assert a == b, path


@pytest.mark.parametrize("cluster", ["a", "b"])
def test_each_clusters_figures_are_its_own_report(fleet: Fleet, cluster: str) -> None:
    close(plain(fleet.reports[cluster]), plain(fleet.own[cluster]), cluster)
    assert fleet.reports[cluster].cluster.capacity_gpus  # real figures, not an empty week on both sides


def test_the_engine_was_asked_once_for_all_clusters(fleet: Fleet) -> None:
    assert fleet.answers is not None
    assert fleet.answers.clusters_seen() == {"a", "b"}


def test_a_dead_watchtower_and_a_cluster_without_series_are_missing(fleet: Fleet) -> None:
    assert set(fleet.missing) == {"c", "d"}
    assert "did not answer" in fleet.missing["c"]
    assert 'cluster="d"' in fleet.missing["d"]


def fleet_of(fleet: Fleet) -> FleetReport:
    return combine(str(THE_WEEK), 0.0, 1.0, NOW, fleet.reports, fleet.missing)


def test_the_fleet_sums_the_clusters_and_names_the_missing(fleet: Fleet) -> None:
    r = fleet_of(fleet)
    assert r.missing == ("c", "d")
    assert [c.name for c in r.clusters] == ["a", "b", "c", "d"]
    assert all(c.used is None for c in r.clusters if c.missing)  # missing, not zero
    own = fleet.own
    for t in r.teams:
        per = {c.cluster: c for c in t.clusters}
        for name, c in per.items():
            mine = own[name].team(t.team)
            assert mine is not None
            assert (c.used, c.entitlement, c.attainment) == (mine.used, mine.entitlement, mine.attainment)
        assert t.used == pytest.approx(sum(c.used for c in t.clusters if c.used is not None))
    total = sum(t.used for o in own.values() for t in o.teams if t.used is not None)
    assert r.used == pytest.approx(total)
    assert r.jain is not None and 0 < r.jain <= 1


def test_a_team_in_one_cluster_only_is_counted_there(fleet: Fleet) -> None:
    r = fleet_of(fleet)
    speech = next(t for t in r.teams if t.team == "speech")
    assert [c.cluster for c in speech.clusters] == ["a"]
    assert speech.used == fleet.own["a"].team("speech").used  # type: ignore[union-attr]
    assert speech.waited_in == ("a",)
    vision = next(t for t in r.teams if t.team == "vision")
    assert vision.waited_in == ("a", "b")


def test_the_history_endpoint_serves_the_weeks_records_behind_the_token(fleet: Fleet) -> None:
    body = fleet.history_body
    assert body["week"] == str(THE_WEEK)
    assert len(body["preemptions"]) == sum(1 for p in PREEMPTIONS if body["start"] <= p.at < body["end"])
    assert {e["key"] for e in body["episodes"]} <= {e.key for e in EPISODES}
    assert body["history_hours"] == pytest.approx(162.0)
    assert fleet.history_refusals == [401, 401, 400]


def test_the_command_line_renders_every_format(fleet: Fleet) -> None:
    got = json.loads(fleet.bodies["json"])
    assert got["missing"] == ["c"]
    assert got["week"] == str(THE_WEEK)
    assert {c["name"] for c in got["clusters"]} == {"a", "b", "c"}
    assert fleet.bodies["csv"].splitlines()[0].startswith("team,cluster,gpu_hours_used")
    assert "missing" in fleet.bodies["text"] and "<table>" in fleet.bodies["html"]
    assert render_fleet(fleet_of(fleet), "text").startswith("Fleet fairness report")


def test_without_cluster_options_the_configurations_fleet_clusters_are_reported(fleet: Fleet) -> None:
    """`--fleet` with no `--cluster` reads `fleet.clusters` (the fleet page's list), each cluster's own
    token file sent to it: the same report as naming them on the command line."""
    assert json.loads(fleet.bodies["json-from-config"]) == json.loads(fleet.bodies["json"])
