"""Fleet mode (`watchtower generate --fleet`, `artefacts.fleet`): the generated files for a metrics engine over
many clusters. Every aggregation and join in every rule, Grafana alert query and panel keeps the cluster
label; every panel reads only the clusters the dashboard's `cluster` variable selects; the promtool tests,
whose input series come from two clusters, pass under both promtools and fail when one rule drops the label;
the dashboards still validate against Grafana's schema; with fleet mode off nothing changes
(test_no_drift.py compares every file with the committed one)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from alerts import fleet_tests, recording
from alerts import generate as alerts_generate
from alerts.alertmanager import alertmanager_config
from dashboards import generate as dashboards_generate
from tests.artefacts.test_dashboards_schema import _validator
from watchtower.commands import generate as artefacts
from watchtower.config import Settings, settings_from_mapping

ROOT = Path(__file__).parents[2]
LABEL_LIST = re.compile(r"\b(by|on)\s*\(([^)]*)\)")
# An aggregation whose label list does not follow its name (`sum (x)`, `max(x)`): it drops every label.
BARE_AGGREGATION = re.compile(
    r"\b(sum|min|max|avg|group|count|stddev|stdvar|topk|bottomk|quantile)\s*\((?!\))"
)
STRING = re.compile(r'"(?:[^"\\]|\\.)*"')


def _fleet(**extra: Any) -> Settings:
    return settings_from_mapping({"artefacts": {"fleet": True}, **extra}, env={})


@pytest.fixture(scope="module")
def files() -> dict[Path, str]:
    return artefacts.render(_fleet())


def _rules(files: dict[Path, str]) -> list[dict[str, Any]]:
    doc = yaml.safe_load(files[Path("alerts") / alerts_generate.RULES])
    return [r for g in doc["groups"] for r in g["rules"]]


def _panel_targets(board: dict[str, Any]) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    out = []
    for p in board["panels"]:
        for q in [p, *p.get("panels", [])]:
            out += [(q, t) for t in q.get("targets", [])]
    return out


def _dashboards(files: dict[Path, str]) -> dict[Path, dict[str, Any]]:
    return {rel: json.loads(text) for rel, text in files.items() if rel.parts[0] == "dashboards"}


def _drops_label(expr: str, label: str) -> list[str]:
    """Return the label lists and aggregations of `expr` that do not keep `label`."""
    text = STRING.sub('""', expr)
    bad = [m.group(0) for m in LABEL_LIST.finditer(text) if label not in re.split(r"[\s,]+", m.group(2))]
    return bad + [m.group(0) for m in BARE_AGGREGATION.finditer(text)]


def test_every_rule_keeps_the_cluster_label(files: dict[Path, str]) -> None:
    rules = _rules(files)
    assert len(rules) > 40
    for r in rules:
        if r["expr"] == "vector(time())":  # the rules' evaluation time: one series whatever the clusters
            continue
        assert _drops_label(r["expr"], "cluster") == [], r.get("record") or r.get("alert")
        if "alert" in r:  # a notification names its cluster
            assert r["annotations"]["summary"].startswith("[{{ $labels.cluster }}] "), r["alert"]


def test_the_prometheus_rule_holds_the_fleet_rules(files: dict[Path, str]) -> None:
    rule = yaml.safe_load(files[Path("deploy/monitoring/prometheusrule.yaml")])
    groups = yaml.safe_load(files[Path("alerts") / alerts_generate.RULES])["groups"]
    assert rule["spec"]["groups"] == groups


def test_every_grafana_alert_query_keeps_the_cluster_label(files: dict[Path, str]) -> None:
    doc = yaml.safe_load(files[Path("alerts") / alerts_generate.GRAFANA_RULES])
    queries = [
        d["model"]["expr"] for g in doc["groups"] for r in g["rules"] for d in r["data"] if d["refId"] == "A"
    ]
    assert len(queries) >= 5
    for q in queries:
        assert _drops_label(q, "cluster") == [], q
    for r in (r for g in doc["groups"] for r in g["rules"]):
        assert r["annotations"]["summary"].startswith("[{{ $labels.cluster }}] "), r["title"]


def test_every_panel_keeps_and_narrows_to_the_selected_clusters(files: dict[Path, str]) -> None:
    boards = _dashboards(files)
    assert len(boards) == 4
    for rel, board in boards.items():
        variables = [v["name"] for v in board["templating"]["list"]]
        assert variables[:2] == ["datasource", "cluster"], rel
        cluster = board["templating"]["list"][1]
        assert cluster["multi"] and cluster["includeAll"] and cluster["allValue"] == ".*"
        assert cluster["query"] == "label_values(watchtower_last_evaluation_timestamp_seconds, cluster)"
        for v in board["templating"]["list"][2:]:
            assert 'cluster=~"$cluster"' in v["query"], (rel, v["name"])
        targets = _panel_targets(board)
        assert targets
        for panel, t in targets:
            expr = t["expr"]
            assert _drops_label(expr, "cluster") == [], (rel, panel["title"])
            selectors = re.findall(r"\{[^{}]*\}", STRING.sub('""', expr).replace('""', "S"))
            assert selectors, (rel, panel["title"])
            assert all("cluster=~S" in s for s in selectors), (rel, panel["title"], expr)
            if panel.get("repeat"):
                assert panel["repeat"] == "cluster" and panel["type"] in ("heatmap", "table")
                assert panel["title"].endswith(" — $cluster")
            elif t.get("legendFormat"):
                assert t["legendFormat"].startswith("{{cluster}} "), (rel, panel["title"])


@pytest.mark.parametrize("uid", ["churn", "fairness", "gpus", "queue"])
def test_fleet_dashboards_validate_against_grafanas_schema(files: dict[Path, str], uid: str) -> None:
    board = files[Path(f"dashboards/generated/watchtower-{uid}.json")]
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _validator().iter_errors(json.loads(board))]
    assert errors == []


def test_a_configured_label_name_is_the_one_kept() -> None:
    settings = _fleet(cluster={"label": "k8s_cluster"})
    files = artefacts.render(settings)
    for r in _rules(files):
        if r["expr"] != "vector(time())":
            assert _drops_label(r["expr"], "k8s_cluster") == [], r.get("record") or r.get("alert")
    for board in _dashboards(files).values():
        for _, t in _panel_targets(board):
            assert 'k8s_cluster=~"$cluster"' in t["expr"]
    tests = yaml.safe_load(files[Path("alerts") / alerts_generate.TESTS])
    assert 'k8s_cluster="a"' in tests["tests"][0]["input_series"][0]["series"]


def test_alertmanager_groups_and_inhibits_within_one_cluster() -> None:
    doc = alertmanager_config(_fleet())
    route = doc["route"]
    assert isinstance(route, dict) and route["group_by"][0] == "cluster"
    inhibits = doc["inhibit_rules"]
    assert isinstance(inhibits, list) and inhibits
    assert all("cluster" in i["equal"] for i in inhibits)


def test_every_route_that_names_its_grouping_groups_by_the_cluster_label() -> None:
    """A child route's own group_by would otherwise put both clusters' alerts in one group; `...` groups by
    every label already; a route without group_by inherits its parent's."""
    hook = {"name": "hook", "webhooks": [{"url": "http://127.0.0.1:9/hook"}]}
    route = {
        "receiver": "hook",
        "group_by": ["alertname"],
        "routes": [
            {"matchers": ['tier="critical"'], "group_by": ["workload"]},
            {"matchers": ['tier="high"'], "group_by": ["..."]},
            {"matchers": ['tier="low"'], "routes": [{"matchers": ['team="t"'], "group_by": ["team"]}]},
        ],
    }
    s = _fleet(alerting={"receivers": [hook], "route": route}, cluster={"label": "k8s_cluster"})
    top = alertmanager_config(s)["route"]
    assert isinstance(top, dict)
    _, critical, high, low = top["routes"]  # the InfoInhibitor's route first
    assert top["group_by"] == ["k8s_cluster", "alertname"]
    assert critical["group_by"] == ["k8s_cluster", "workload", "kind"]
    assert high["group_by"] == ["..."]
    assert "group_by" not in low and low["routes"][0]["group_by"] == ["k8s_cluster", "team"]


def test_fleet_mode_off_is_the_single_cluster_output() -> None:
    off = settings_from_mapping({"artefacts": {"fleet": False}}, env={})
    assert artefacts.render(off) == artefacts.render(Settings())
    assert dashboards_generate.render_all(off) != dashboards_generate.render_all(_fleet())


# --- promtool --------------------------------------------------------------------------------------------


def _write(files: dict[Path, str], root: Path) -> Path:
    for rel, text in files.items():
        if rel.parts[0] == "alerts":
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
    return root / "alerts" / alerts_generate.TESTS


def _run(promtool: str, test_file: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [promtool, "test", "rules", str(test_file)], capture_output=True, text=True, check=False
    )


def test_the_two_cluster_promtool_tests_pass(promtool: str, files: dict[Path, str], tmp_path: Path) -> None:
    done = _run(promtool, _write(files, tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr


def test_only_the_waiting_cluster_alerts(files: dict[Path, str]) -> None:
    doc = yaml.safe_load(files[Path("alerts") / alerts_generate.TESTS])
    first = doc["tests"][0]
    fired = [a for case in first["alert_rule_test"] for a in case["exp_alerts"]]
    assert fired and {a["exp_labels"]["cluster"] for a in fired} == {"a"}
    recorded = {s["labels"] for c in first["promql_expr_test"] for s in c["exp_samples"]}
    assert any('cluster="a"' in s for s in recorded) and any('cluster="b"' in s for s in recorded)
    # the rest: each single-cluster test on both clusters
    assert len(doc["tests"]) == 1 + len(
        yaml.safe_load(alerts_generate.render_all(Settings())[alerts_generate.TESTS])["tests"]
    )


def test_a_rule_that_mixes_the_clusters_fails_the_promtool_tests(
    promtool: str, files: dict[Path, str], tmp_path: Path
) -> None:
    """The tests can fail: the oldest-wait-per-tier rule without the cluster label in its `by`, and the
    wait alerts without it in theirs, make the two-cluster test of one tier fail."""
    rules_path = Path("alerts") / alerts_generate.RULES
    doc = yaml.safe_load(files[rules_path])
    for g in doc["groups"]:
        for r in g["rules"]:
            if r.get("record") == recording.OLDEST_WAIT_BY_TIER:
                r["expr"] = r["expr"].replace("by (cluster, tier)", "by (tier)")
    mixed = {**files, rules_path: yaml.safe_dump(doc, sort_keys=False, width=1_000_000)}
    test_file = _write(mixed, tmp_path)
    tests = yaml.safe_load(test_file.read_text())
    tests["tests"] = tests["tests"][:1]  # only a waits: quick, and enough to tell
    test_file.write_text(yaml.safe_dump(tests, sort_keys=False, width=1_000_000), encoding="utf-8")
    done = _run(promtool, test_file)
    assert done.returncode != 0, done.stdout
    assert recording.OLDEST_WAIT_BY_TIER in done.stdout + done.stderr


def test_with_label_adds_the_cluster_to_any_series_text() -> None:
    assert fleet_tests.with_label('up{job="w"}', "cluster", "a") == 'up{job="w",cluster="a"}'
    assert fleet_tests.with_label("jain", "cluster", "b") == 'jain{cluster="b"}'
    assert fleet_tests.with_label("x{}", "cluster", "a") == 'x{cluster="a"}'


def test_the_cli_switch_writes_the_fleet_form(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cli = [sys.executable, "-m", "watchtower.cli", "generate", "--fleet"]
    done = subprocess.run([*cli, "--out", str(tmp_path)], cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    assert {tmp_path / rel for rel in artefacts.render(_fleet())} == {
        p for p in tmp_path.rglob("*") if p.is_file()
    }
    board = json.loads((tmp_path / "dashboards/generated/watchtower-queue.json").read_text())
    assert [v["name"] for v in board["templating"]["list"]][:2] == ["datasource", "cluster"]
    # The committed files are the single-cluster form: against them the fleet form has drifted.
    done = subprocess.run([*cli, "--check"], cwd=ROOT, capture_output=True, text=True, env=env)
    assert done.returncode == 1 and "out of date" in done.stderr


def test_amtool_accepts_the_fleet_alertmanager_configuration(
    amtool: str, files: dict[Path, str], tmp_path: Path
) -> None:
    path = tmp_path / "alertmanager.yaml"
    path.write_text(files[Path("alerts") / alerts_generate.ALERTMANAGER], encoding="utf-8")
    done = subprocess.run([amtool, "check-config", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
